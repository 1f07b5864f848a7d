//go:build !(aix || darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris)

package embedded

// mapPage allocates a page on the Go heap where anonymous mappings are not
// available; a released page is the garbage collector's to free.
func mapPage(n int) []byte {
	if refuseMaps.Load()&refuseAll != 0 {
		return nil
	}
	return make([]byte, n)
}

func unmapPage([]byte) {}
