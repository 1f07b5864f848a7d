//go:build linux

package transport

import (
	"bytes"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A write that fails while a session is being served (the client reset the
// connection) closes the connection only once the session has returned: a
// session is never told Closed from inside its own Serve or Flush, where it
// would go on starting commands, and reading input the transport has freed,
// after it let go of everything it had in flight. gnet closed it there, from
// inside Send: the commands started after that were never settled, and gnet's
// Shutdown waited for them until its deadline.
func TestFailedWriteClosesBetweenCalls(t *testing.T) {
	for name, newT := range eventLoopTransports() {
		t.Run(name, func(t *testing.T) {
			h := &failHandler{closed: make(chan struct{})}
			addr, _ := startHandler(t, newT, Options{Loops: 1}, h)
			c := dial(t, addr, 5*time.Second)
			// The first line's reply goes to a socket shut for writing:
			// the write fails, and the second line is still served in the
			// same call.
			_, err := c.Write([]byte("fail\r\nnext\r\n"))
			require.NoError(t, err)
			select {
			case <-h.closed:
			case <-time.After(5 * time.Second):
				t.Fatal("the connection was not closed after its write failed")
			}
			require.False(t, h.reentered.Load(), "Closed was called inside Serve or Flush")
			require.Equal(t, int64(2), h.lines.Load(), "lines served")
		})
	}
}

// failHandler's sessions shut their socket for writing at "fail" and then
// reply to every line at once, from inside Serve.
type failHandler struct {
	lines     atomic.Int64
	reentered atomic.Bool
	closed    chan struct{}
}

func (h *failHandler) Admit() (bool, []byte) { return true, nil }
func (h *failHandler) Unadmit()              {}
func (h *failHandler) NewLoop(int) Loop      { return failLoop{h} }
func (h *failHandler) Unsent() uint64        { return 0 }

type failLoop struct{ h *failHandler }

func (l failLoop) Open(c Conn) Session       { return &failSession{h: l.h, c: c} }
func (failLoop) BeginTurn(int64, bool, bool) {}
func (failLoop) EndTurn() bool               { return false }

type failSession struct {
	h      *failHandler
	c      Conn
	inCall bool
}

func (s *failSession) Serve(in []byte) int {
	s.inCall = true
	defer func() { s.inCall = false }()
	used := 0
	for {
		i := bytes.IndexByte(in[used:], '\n')
		if i < 0 {
			return used
		}
		line := in[used : used+i+1]
		used += i + 1
		if string(line) == "fail\r\n" {
			if err := syscall.Shutdown(connFd(s.c), syscall.SHUT_WR); err != nil {
				panic(err)
			}
		}
		s.h.lines.Add(1)
		s.c.Send(append(s.c.Output(), line...))
	}
}

func (s *failSession) Flush()        {}
func (s *failSession) Owes() bool    { return false }
func (s *failSession) Closing() bool { return false }
func (s *failSession) Stop()         {}

func (s *failSession) Closed() {
	if s.inCall {
		s.h.reentered.Store(true)
	}
	close(s.h.closed)
}

// connFd is the socket of a connection of the event-loop transports.
func connFd(c Conn) int {
	switch c := c.(type) {
	case *gnetConn:
		return c.c.Fd()
	case *epollConn:
		return c.fd
	}
	panic("connFd: not an event-loop connection")
}
