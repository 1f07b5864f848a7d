package memcache

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/internal/shardmetrics"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
	"github.com/ndbgate/ndbgate/ndbclient/ndbclienttest"
	"github.com/ndbgate/ndbgate/protocols/memcache/transport"
)

// eventLoops are the loops this platform can serve with, its default first.
// loopEpollRing is the epoll loop batching its syscalls through io_uring
// (Config.BatchSyscalls), ndbgate's default on Linux; where the kernel has
// no io_uring it runs as plain epoll.
func eventLoops() []string {
	if transport.EpollAvailable {
		return []string{loopEpollRing, EventLoopEpoll, EventLoopGnet}
	}
	return []string{EventLoopGnet}
}

const loopEpollRing = "epoll+io_uring"

// forEachLoop runs fn once per event loop.
func forEachLoop(t *testing.T, fn func(t *testing.T, loop string)) {
	for _, loop := range eventLoops() {
		t.Run(loop, func(t *testing.T) { fn(t, loop) })
	}
}

func startServer(t *testing.T, loop string, drv ndbclient.Driver, maxPending int) string {
	t.Helper()
	addr, _ := startServerConfig(t, Config{EventLoop: loop, MaxPending: maxPending}, drv)
	return addr
}

// startServerConfig serves cfg (Addr: a free port) on drv and shuts the
// server down when t ends.
func startServerConfig(t *testing.T, cfg Config, drv ndbclient.Driver) (string, *Server) {
	t.Helper()
	return startServerService(t, cfg, newDemoService(t, drv))
}

// startServerService serves cfg (Addr: a free port) with svc and shuts the
// server down when t ends.
func startServerService(t *testing.T, cfg Config, svc *gateway.Service) (string, *Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	cfg.Addr, cfg.Version = addr, "test"
	if cfg.EventLoop == loopEpollRing {
		cfg.EventLoop, cfg.BatchSyscalls = EventLoopEpoll, true
	}
	srv := NewServer(cfg, svc, discardLog)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve() }()
	select {
	case <-srv.Started():
	case err := <-errc:
		t.Fatalf("serve: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("server did not start")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return addr, srv
}

// dialServer connects to addr with deadline on every read and write; the
// connection closes when t ends.
func dialServer(t *testing.T, addr string, deadline time.Duration) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(deadline)))
	return c
}

// newDemoService serves the default container on drv.
func newDemoService(tb testing.TB, drv ndbclient.Driver) *gateway.Service {
	tb.Helper()
	tbl, err := drv.CreateTable(gateway.DemoTable(1 << 20))
	require.NoError(tb, err)
	c, err := gateway.NewContainer(gateway.DefaultContainerSpec(), tbl)
	require.NoError(tb, err)
	svc, err := gateway.New(gateway.Options{Backend: ndbclient.NewClient(drv), Routes: []gateway.Route{{Container: c}}})
	require.NoError(tb, err)
	return svc
}

var discardLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func newEngine(t *testing.T) *embedded.Engine {
	e := embedded.New(embedded.Config{Partitions: 8, Nodes: 2})
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// textSender dials addr and returns a function that writes s and reads
// replies reply units (readLines) from the connection.
func textSender(t *testing.T, addr string) func(s string, replies int) []string {
	t.Helper()
	c := dialServer(t, addr, 10*time.Second)
	r := bufio.NewReader(c)
	return func(s string, replies int) []string {
		t.Helper()
		_, err := c.Write([]byte(s))
		require.NoError(t, err)
		return readLines(t, r, replies)
	}
}

// readReplies reads n reply units from r: a line, or for VALUE a block up to END.
func readLines(t *testing.T, r *bufio.Reader, n int) []string {
	t.Helper()
	out := make([]string, 0, n)
	for len(out) < n {
		line, err := r.ReadString('\n')
		require.NoError(t, err, "after %q", out)
		out = append(out, line)
	}
	return out
}

func TestPipelinedRepliesStayInOrderWhenBackendCompletesOutOfOrder(t *testing.T) {
	forEachLoop(t, func(t *testing.T, loop string) {
		addr := startServer(t, loop, ndbclienttest.Later(newEngine(t), 3*time.Millisecond), 8)
		conn := dialServer(t, addr, 20*time.Second)

		// 200 commands in one write; MaxPending 8 also exercises backpressure.
		var req strings.Builder
		var want []string
		for i := 0; i < 50; i++ {
			fmt.Fprintf(&req, "set k%d 7 0 %d\r\nv%d\r\n", i, len(fmt.Sprint(i))+1, i)
			want = append(want, "STORED\r\n")
			fmt.Fprintf(&req, "get k%d nokey\r\n", i)
			want = append(want, fmt.Sprintf("VALUE k%d 7 %d\r\n", i, len(fmt.Sprint(i))+1), fmt.Sprintf("v%d\r\n", i), "END\r\n")
			fmt.Fprintf(&req, "incr n 1\r\n")
			if i == 0 {
				want = append(want, "NOT_FOUND\r\n")
			} else {
				want = append(want, fmt.Sprintf("%d\r\n", i))
			}
			if i == 0 {
				req.WriteString("set n 0 0 1\r\n0\r\n")
				want = append(want, "STORED\r\n")
			}
			fmt.Fprintf(&req, "bogus\r\n")
			want = append(want, "ERROR\r\n")
		}
		_, err := conn.Write([]byte(req.String()))
		require.NoError(t, err)
		got := readLines(t, bufio.NewReader(conn), len(want))
		require.Equal(t, want, got)
	})
}

// Small replies wait for the loop's turn to end and large ones go at once
// (epoll). Mixed on several connections, with completions arriving later on
// another goroutine, each connection still gets its replies whole and in
// order.
func TestSmallAndLargeRepliesStayInOrder(t *testing.T) {
	forEachLoop(t, func(t *testing.T, loop string) {
		addr := startServer(t, loop, ndbclienttest.Later(newEngine(t), time.Millisecond), 16)
		big := strings.Repeat("0123456789abcdef", 2<<10) // 32 KiB: above heldReplyMax
		setup := dialServer(t, addr, 20*time.Second)
		_, err := fmt.Fprintf(setup, "set big 1 0 %d\r\n%s\r\nset small 2 0 5\r\nhello\r\n", len(big), big)
		require.NoError(t, err)
		require.Equal(t, []string{"STORED\r\n", "STORED\r\n"}, readLines(t, bufio.NewReader(setup), 2))

		var req strings.Builder
		var want strings.Builder
		for i := range 40 {
			if i%3 == 0 {
				req.WriteString("get big\r\n")
				fmt.Fprintf(&want, "VALUE big 1 %d\r\n%s\r\nEND\r\n", len(big), big)
			} else {
				req.WriteString("get small\r\n")
				want.WriteString("VALUE small 2 5\r\nhello\r\nEND\r\n")
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			conn := dialServer(t, addr, 20*time.Second)
			wg.Add(1)
			go func() {
				defer wg.Done()
				// One command at a time, so that new input and completions
				// meet in the same turn of the loop.
				go func() {
					for _, cmd := range strings.SplitAfter(req.String(), "\n") {
						if _, err := conn.Write([]byte(cmd)); err != nil {
							return
						}
						time.Sleep(200 * time.Microsecond)
					}
				}()
				got := make([]byte, want.Len())
				if _, err := io.ReadFull(conn, got); err != nil {
					errs <- err
					return
				}
				if string(got) != want.String() {
					errs <- fmt.Errorf("replies differ from the first %d bytes", firstDiff(got, []byte(want.String())))
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestManyConnectionsWithSlowBackend(t *testing.T) {
	forEachLoop(t, func(t *testing.T, loop string) {
		addr := startServer(t, loop, ndbclienttest.Later(newEngine(t), time.Millisecond), 64)
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for c := 0; c < 16; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					errs <- err
					return
				}
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
				r := bufio.NewReader(conn)
				for i := 0; i < 100; i++ {
					key := fmt.Sprintf("c%d-%d", c, i)
					fmt.Fprintf(conn, "set %s 0 0 %d\r\n%s\r\nget %s\r\n", key, len(key), key, key)
					want := []string{"STORED\r\n", fmt.Sprintf("VALUE %s 0 %d\r\n", key, len(key)), key + "\r\n", "END\r\n"}
					for _, w := range want {
						line, err := r.ReadString('\n')
						if err != nil || line != w {
							errs <- fmt.Errorf("conn %d: want %q, got %q (%v)", c, w, line, err)
							return
						}
					}
				}
			}(c)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})
}

func TestQuitClosesAfterQueuedReplies(t *testing.T) {
	forEachLoop(t, func(t *testing.T, loop string) {
		addr := startServer(t, loop, ndbclienttest.Later(newEngine(t), 2*time.Millisecond), 16)
		conn := dialServer(t, addr, 10*time.Second)
		_, err := conn.Write([]byte("set a 0 0 1\r\nx\r\nget a\r\nquit\r\nget a\r\n"))
		require.NoError(t, err)
		all, err := io.ReadAll(conn)
		require.NoError(t, err)
		require.Equal(t, "STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n", string(all))
	})
}

// recordingTransport collects replies and counts wakes.
type recordingTransport struct {
	out   []byte
	wakes int
}

func (r *recordingTransport) Output() []byte { return nil }
func (r *recordingTransport) Send(b []byte)  { r.out = append(r.out, b...) }
func (r *recordingTransport) Wake()          { r.wakes++ }
func (r *recordingTransport) Backlog() int   { return 0 }
func (r *recordingTransport) WakeWhenSent()  {}

// recordedConn is a connection of srv whose replies are recorded.
func recordedConn(srv *Server) (*connState, *recordingTransport) {
	rt := &recordingTransport{}
	return srv.newConnState(rt, shardmetrics.SharedShard, nil), rt
}

// A deep pipeline is served commandsPerServe commands at a time: the
// connection yields to its event loop's other connections and asks to be
// called again, and every reply still comes out, in order.
func TestDeepPipelineYields(t *testing.T) {
	srv := NewServer(Config{MaxPending: 1024, Version: "test"}, newDemoService(t, newEngine(t)), discardLog)
	cs, rt := recordedConn(srv)

	const n = 1000
	var in strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, "set k%d 0 0 1\r\n%d\r\n", i%7, i%10)
	}
	buf := []byte(in.String())
	calls := 0
	for len(buf) > 0 {
		used := cs.serve(buf)
		cs.flush()
		require.Positive(t, used, "progress on every call")
		buf = buf[used:]
		calls++
	}
	require.Equal(t, (n+commandsPerServe-1)/commandsPerServe, calls)
	require.Equal(t, calls-1, rt.wakes, "a wake for every call that stopped with input left")
	require.Equal(t, strings.Repeat("STORED\r\n", n), string(rt.out))
	require.Zero(t, cs.undone.Load())
}

// TestBigGetDoesNotHoldOthers: a text get of many keys is one command, so
// commandsPerServe did not bound it; run whole it held the event loop for
// milliseconds (5000 keys: 2-5 ms, 30 ms cold) while the loop's other
// connections waited. It starts getKeysPerServe keys a call, yields, and
// resumes where it stopped; the reply is whole and in order, and a command
// after it runs once it is done.
func TestBigGetDoesNotHoldOthers(t *testing.T) {
	srv := NewServer(Config{MaxPending: 1024, Version: "test"}, newDemoService(t, newEngine(t)), discardLog)
	cs, rt := recordedConn(srv)

	const n = 5*getKeysPerServe + 7
	var in strings.Builder
	late := fmt.Sprintf("k%d", n-2) // a key in the get's last slice
	fmt.Fprintf(&in, "set k3 0 0 2\r\nv3\r\nset %s 0 0 1\r\nw\r\nget", late)
	for i := 0; i < n; i++ {
		if i%3 == 0 {
			in.WriteString(" ") // runs of spaces between keys, as memcached allows
		}
		fmt.Fprintf(&in, " k%d", i)
	}
	in.WriteString("\r\nget k3\r\n")
	buf := []byte(in.String())
	line := in.String()[strings.Index(in.String(), "get"):]
	calls := 0
	for len(buf) > 0 {
		used := cs.serve(buf)
		cs.flush()
		buf = buf[used:]
		calls++
		if calls == 1 {
			// Stopped after the first slice: resumed from the next key's
			// byte, so the keys already served are not parsed again.
			first := strings.Index(line, " k0 ") + 1
			next := strings.Index(line, fmt.Sprintf(" k%d ", getKeysPerServe)) + 1
			require.Equal(t, next-first, cs.getResume.Skip)
		}
		require.Less(t, calls, 100, "no progress")
	}
	require.Zero(t, cs.getResume, "the get finished")
	// The sets and the get's first slice, then a call a slice (the last
	// slice leaves room for the get after it).
	require.Equal(t, (n+getKeysPerServe-1)/getKeysPerServe, calls)
	require.Equal(t, calls-1, rt.wakes, "a wake for every call that stopped with input left")
	want := "STORED\r\nSTORED\r\nVALUE k3 0 2\r\nv3\r\nVALUE " + late + " 0 1\r\nw\r\nEND\r\nVALUE k3 0 2\r\nv3\r\nEND\r\n"
	require.Equal(t, want, string(rt.out))
	require.Zero(t, cs.undone.Load())
}

// Shutdown stops accepting, sends the replies of requests still with the
// backend, then closes their connections. (Commands read but not yet started,
// such as a get waiting behind a set of its key, are dropped, as memcached
// drops everything on SIGTERM.)
func TestShutdownSendsQueuedReplies(t *testing.T) {
	forEachLoop(t, func(t *testing.T, loop string) {
		addr, srv := startServerConfig(t, Config{EventLoop: loop, MaxPending: 16}, ndbclienttest.Later(newEngine(t), 200*time.Millisecond))
		conn := dialServer(t, addr, 10*time.Second)
		r := bufio.NewReader(conn)
		_, err := conn.Write([]byte("set b 0 0 1\r\ny\r\n"))
		require.NoError(t, err)
		require.Equal(t, []string{"STORED\r\n"}, readLines(t, r, 1))
		_, err = conn.Write([]byte("set a 0 0 1\r\nx\r\nget b\r\n"))
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond) // both are with the backend now

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
		all, err := io.ReadAll(r)
		require.NoError(t, err)
		require.Equal(t, "STORED\r\nVALUE b 0 1\r\ny\r\nEND\r\n", string(all))
		_, err = net.DialTimeout("tcp", addr, time.Second)
		require.Error(t, err, "still accepting after Shutdown")
	})
}

// Replies far larger than the socket's buffer, to a client that does not read
// for a while, leave in pieces (partial writes, then the rest as the socket
// drains) and arrive whole and in order.
func TestLargeRepliesToASlowReader(t *testing.T) {
	forEachLoop(t, func(t *testing.T, loop string) {
		addr := startServer(t, loop, newEngine(t), 64)
		conn := dialServer(t, addr, 20*time.Second)
		r := bufio.NewReaderSize(conn, 1<<20)

		value := make([]byte, 512<<10)
		for i := range value {
			value[i] = byte('a' + i%26)
		}
		_, err := fmt.Fprintf(conn, "set big 5 0 %d\r\n%s\r\n", len(value), value)
		require.NoError(t, err)
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "STORED\r\n", line)

		const gets = 24 // 12 MiB of replies
		_, err = conn.Write([]byte(strings.Repeat("get big\r\n", gets) + "version\r\n"))
		require.NoError(t, err)
		time.Sleep(200 * time.Millisecond) // the server's writes fill the socket meanwhile
		header := fmt.Sprintf("VALUE big 5 %d\r\n", len(value))
		got := make([]byte, len(header)+len(value)+len("\r\nEND\r\n"))
		for i := range gets {
			_, err := io.ReadFull(r, got)
			require.NoError(t, err, "reply %d", i)
			require.Equal(t, header, string(got[:len(header)]), "reply %d", i)
			require.True(t, string(got[len(header):len(header)+len(value)]) == string(value), "reply %d: value differs", i)
			require.Equal(t, "\r\nEND\r\n", string(got[len(header)+len(value):]), "reply %d", i)
		}
		line, err = r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "VERSION test\r\n", line)
	})
}

// Past MaxConnections a new connection gets memcached's refusal and is
// closed; once one closes, a new one is served again.
func TestConnectionLimit(t *testing.T) {
	forEachLoop(t, func(t *testing.T, loop string) {
		addr, _ := startServerConfig(t, Config{EventLoop: loop, MaxConnections: 2, MaxPending: 16}, newEngine(t))
		dial := func() (net.Conn, *bufio.Reader) {
			c := dialServer(t, addr, 10*time.Second)
			return c, bufio.NewReader(c)
		}
		served := func(c net.Conn, r *bufio.Reader) {
			_, err := c.Write([]byte("version\r\n"))
			require.NoError(t, err)
			require.Equal(t, []string{"VERSION test\r\n"}, readLines(t, r, 1))
		}
		c1, r1 := dial()
		served(c1, r1)
		c2, r2 := dial()
		served(c2, r2)

		_, r3 := dial()
		all, err := io.ReadAll(r3)
		require.NoError(t, err)
		require.Equal(t, "ERROR Too many open connections\r\n", string(all))

		require.NoError(t, c1.Close())
		require.Eventually(t, func() bool {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return false
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write([]byte("version\r\n")); err != nil {
				return false
			}
			line, err := bufio.NewReader(c).ReadString('\n')
			return err == nil && line == "VERSION test\r\n"
		}, 5*time.Second, 20*time.Millisecond, "a closed connection's place is never freed")
		served(c2, r2)
	})
}
