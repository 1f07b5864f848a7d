//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package embedded

import "os"

// lockFile: no flock here, so nothing stops two engines sharing a data dir.
func lockFile(*os.File) error { return nil }

// freeBytes: unknown here.
func freeBytes(string) int64 { return -1 }
