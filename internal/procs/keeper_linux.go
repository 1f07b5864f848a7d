//go:build linux

package procs

import (
	"syscall"
	"unsafe"
)

const keeperSupported = true

// rawSleep sleeps up to ns nanoseconds in a raw syscall, so that the
// calling goroutine keeps its P; a signal cuts it short (nanosleep is never
// restarted), which is how a stop-the-world or a preemption reaches it.
func rawSleep(ns int64) {
	ts := syscall.NsecToTimespec(ns)
	_, _, _ = syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}
