//go:build unix

package transport

import (
	"syscall"
	"unsafe"
)

// Rule 1 of the runtime contract (runtime_linux.go), for replies written by
// the epoll loops and, on every Unix, by gnet's: a raw write moves at most
// rawWriteMax bytes.

// rawWriteMax bounds what is read or written raw (rule 1).
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
