package transport

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lineHandler is a protocol for the transports' tests: each line is
// answered with itself, but "version" with "VERSION test" and "quit" by
// closing once the replies before it are out.
type lineHandler struct {
	open   atomic.Int64 // admitted and not yet closed
	lines  atomic.Int64 // served
	polled atomic.Int64 // turns begun whose answer may be polled for
}

func (h *lineHandler) Admit() (bool, []byte) { h.open.Add(1); return true, nil }
func (h *lineHandler) Unadmit()              { h.open.Add(-1) }
func (h *lineHandler) NewLoop(int) Loop      { return lineLoop{h} }
func (h *lineHandler) Unsent() uint64        { return 0 }

type lineLoop struct{ h *lineHandler }

func (l lineLoop) Open(c Conn) Session { return &lineSession{h: l.h, c: c} }
func (l lineLoop) BeginTurn(_ int64, _, poll bool) {
	if poll {
		l.h.polled.Add(1)
	}
}
func (lineLoop) EndTurn() bool { return false }

type lineSession struct {
	h       *lineHandler
	c       Conn
	replies []byte
	closing bool
}

func (s *lineSession) Serve(in []byte) int {
	used := 0
	for !s.closing {
		i := bytes.IndexByte(in[used:], '\n')
		if i < 0 {
			break
		}
		line := in[used : used+i+1]
		used += i + 1
		switch string(line) {
		case "version\r\n":
			s.replies = append(s.replies, "VERSION test\r\n"...)
		case "quit\r\n":
			s.closing = true
		default:
			s.replies = append(s.replies, line...)
		}
		s.h.lines.Add(1)
	}
	return used
}

func (s *lineSession) Flush() {
	if len(s.replies) == 0 {
		return
	}
	out := append(s.c.Output(), s.replies...)
	s.replies = s.replies[:0]
	s.c.Send(out)
}

func (s *lineSession) Owes() bool    { return len(s.replies) > 0 }
func (s *lineSession) Closing() bool { return s.closing }
func (s *lineSession) Stop()         { s.closing = true }
func (s *lineSession) Closed()       { s.h.open.Add(-1) }

var discardLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// startTransport serves a lineHandler with the transport made by newT on a
// free port, and shuts it down when t ends.
func startTransport(t *testing.T, newT func(Options) Transport, opts Options) (string, *lineHandler, Transport) {
	t.Helper()
	h := &lineHandler{}
	addr, tr := startHandler(t, newT, opts, h)
	return addr, h, tr
}

// startHandler serves h with the transport made by newT on a free port, and
// shuts it down when t ends.
func startHandler(t *testing.T, newT func(Options) Transport, opts Options, h Handler) (string, Transport) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	opts.Listen, opts.Log = []Addr{{"tcp", addr}}, discardLog
	tr := newT(opts)
	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- tr.Serve(h, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("serve: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("transport did not start")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
	return addr, tr
}

// dial connects to addr with deadline on every read and write; the
// connection closes when t ends.
func dial(t *testing.T, addr string, deadline time.Duration) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(deadline)))
	return c
}
