//go:build !linux

package transport

import (
	"syscall"
	"unsafe"
)

// Off Linux only gnet serves, and the one thing it asks of the runtime is
// runtime_linux.go's rule 1 for its replies: a raw write moves at most
// rawWriteMax bytes.

const rawWriteMax = 64 << 10

// writeFd writes b to a non-blocking socket: raw up to rawWriteMax, beyond
// it as an ordinary syscall.
func writeFd(fd int, b []byte) (int, syscall.Errno) {
	var n uintptr
	var errno syscall.Errno
	if len(b) <= rawWriteMax {
		n, _, errno = syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	} else {
		n, _, errno = syscall.Syscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	}
	if errno != 0 {
		return 0, errno
	}
	return int(n), 0
}
