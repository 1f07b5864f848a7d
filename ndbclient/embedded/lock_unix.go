//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package embedded

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive flock on f without waiting; closing f lets go.
func lockFile(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) }
