//go:build !amd64 && !arm64

package embedded

func prefetch(uintptr) {}
