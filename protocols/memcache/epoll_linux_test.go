//go:build linux

package memcache

import (
	"bufio"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Epoll loops keep their P while they wait, so serving raises GOMAXPROCS to
// leave one for everything else, and a garbage collection, which must stop
// every P, still completes while the loops wait and while they serve.
func TestEpollLoopsLeaveAProcessorAndLetGCRun(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	addr, _ := startServerConfig(t, Config{EventLoop: EventLoopEpoll, Loops: before + 1}, newEngine(t))
	require.Greater(t, runtime.GOMAXPROCS(0), before+1, "no P left over for the rest of the program")

	conn := dialServer(t, addr, 20*time.Second)
	r := bufio.NewReader(conn)
	gc := func() {
		done := make(chan struct{})
		go func() { runtime.GC(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("garbage collection blocked by the event loops")
		}
	}
	for i := range 50 {
		_, err := conn.Write([]byte("version\r\n"))
		require.NoError(t, err)
		if i%2 == 0 {
			gc() // while the request is being served, or the loop is in its raw wait
		}
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "VERSION test\r\n", line)
	}
	time.Sleep(3 * rawWaitMillis * time.Millisecond) // past the raw wait: idle loops
	gc()
}
