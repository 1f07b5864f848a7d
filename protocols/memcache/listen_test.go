package memcache

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A port another process holds: whatever the loop, Serve's error is
// EADDRINUSE, and ListenError says what to do about it.
func TestListenAddressInUse(t *testing.T) {
	forEachLoop(t, func(t *testing.T, loop string) {
		held, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer held.Close()
		addr := held.Addr().String()

		cfg := Config{Addr: addr, EventLoop: loop, Version: "test"}
		if loop == loopEpollRing {
			cfg.EventLoop, cfg.BatchSyscalls = EventLoopEpoll, true
		}
		srv := NewServer(cfg, newDemoService(t, newEngine(t)), discardLog)
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve() }()
		select {
		case err = <-errc:
		case <-srv.Started():
			t.Fatal("served on a port already bound")
		case <-time.After(5 * time.Second):
			t.Fatal("Serve neither failed nor started")
		}
		require.ErrorIs(t, err, syscall.EADDRINUSE)
		le := ListenError(addr, err)
		assert.ErrorIs(t, le, syscall.EADDRINUSE, "the cause stays inspectable")
		assert.Contains(t, le.Error(), "is another memcached or ndbgate running?")
		assert.Contains(t, le.Error(), addr)
	})
}

// Other failures to listen get no advice about another server.
func TestListenErrorOther(t *testing.T) {
	denied := &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", syscall.EACCES)}
	le := ListenError("0.0.0.0:11", denied)
	assert.ErrorIs(t, le, syscall.EACCES)
	assert.NotContains(t, le.Error(), "another memcached")
	assert.Contains(t, le.Error(), "memcache listener 0.0.0.0:11")

	le = ListenError("x:1", errors.New("no such host"))
	assert.NotContains(t, le.Error(), "another memcached")
}
