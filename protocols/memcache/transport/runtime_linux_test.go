//go:build linux

package transport

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The bounds below are generous on purpose (a loaded machine of two shared
// cores, the race detector): they are not latency targets, but they fail
// when a loop keeps its P against the runtime's wishes, which stalls a
// stop-the-world or a goroutine until the loop lets go, forever for an idle
// loop that never does.
const (
	stwBound   = time.Second      // one stop-the-world pause
	gcBound    = 10 * time.Second // one whole collection
	delayBound = time.Second      // a runnable goroutine waiting for a P
)

// Epoll loops keep their P while they wait, so serving raises GOMAXPROCS to
// leave one for everything else, and a garbage collection, which must stop
// every P, still completes while the loops wait and while they serve.
func TestEpollLoopsLeaveAProcessorAndLetGCRun(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	addr, _, _ := startTransport(t, Epoll, Options{Loops: before + 1})
	require.Greater(t, runtime.GOMAXPROCS(0), before+1, "no P left over for the rest of the program")

	conn := dial(t, addr, 20*time.Second)
	r := bufio.NewReader(conn)
	for i := range 50 {
		_, err := conn.Write([]byte("version\r\n"))
		require.NoError(t, err)
		if i%2 == 0 {
			gcWithin(t) // while the request is being served, or the loop is in its raw wait
		}
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "VERSION test\r\n", line)
	}
	time.Sleep(3 * rawWaitMillis * time.Millisecond) // past the raw wait: idle loops
	gcWithin(t)
}

// While the loops serve a flood of pipelined requests, and once they are
// idle again, collections keep completing and no stop-the-world pause comes
// near stwBound (the runtime's own histogram of them).
func TestStopTheWorldWhileLoopsServe(t *testing.T) {
	forEachEpoll(t, func(t *testing.T, mode string) {
		r := serveInProcess(t, mode)
		t.Logf("%d collections, the longest %v; longest stop-the-world pause under %v", r.gcs, r.worstGC, r.worstPause)
		require.Positive(t, r.gcs, "no collection completed")
		require.Less(t, r.worstGC, gcBound, "a collection (or the wait for the next) took too long")
		require.Less(t, r.worstPause, stwBound)
	})
}

// While the loops serve a flood, and once they are idle again, a goroutine
// that sleeps a millisecond at a time, and allocates, is never kept from
// running for delayBound: a loop leaves a P over and gives its own up when
// the runtime asks.
func TestBusyLoopsDoNotStarveOtherGoroutines(t *testing.T) {
	forEachEpoll(t, func(t *testing.T, mode string) {
		r := serveInProcess(t, mode)
		t.Logf("%d ticks, the longest wait %v", r.ticks, r.worstTick)
		require.Positive(t, r.ticks, "the goroutine never ran")
		require.Less(t, r.worstTick, delayBound)
	})
}

// forEachEpoll runs fn for the epoll loops with and without io_uring.
func forEachEpoll(t *testing.T, fn func(t *testing.T, mode string)) {
	for _, mode := range []string{"epoll+io_uring", "epoll"} {
		t.Run(mode, func(t *testing.T) { fn(t, mode) })
	}
}

// childEnv makes TestLoopServerProcess the server of serveInProcess.
const childEnv = "NDBGATE_TRANSPORT_TEST_SERVER"

// loopReport is what serveInProcess saw of the server's process: ticks of
// its sleeping goroutine and the longest wait between two (or after the
// last), completed collections and the longest one (or wait for one), and
// the longest stop-the-world pause its runtime counted.
type loopReport struct {
	ticks, gcs                     int
	worstTick, worstGC, worstPause time.Duration
	reported                       bool // the pause was reported
}

// serveInProcess runs the epoll loops (mode) in a process of their own
// (TestLoopServerProcess), floods them from this one for floodFor, lets
// them idle for idleFor, and reports. In a process of its own, a server
// whose world stopped for good falls silent, which this process's clock
// sees; and the clients do not compete with the loops for its Ps.
func serveInProcess(t *testing.T, mode string) loopReport {
	t.Helper()
	const floodFor, idleFor = 500 * time.Millisecond, 100 * time.Millisecond
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoopServerProcess$")
	// The race detector's exit would sleep a second.
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	var (
		mu     sync.Mutex
		r      loopReport
		lastTk time.Time
		lastGC time.Time
	)
	addr, finished := make(chan string, 1), make(chan struct{})
	go func() {
		defer close(finished)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			word, arg, _ := strings.Cut(sc.Text(), " ")
			now := time.Now()
			mu.Lock()
			switch word {
			case "addr":
				addr <- arg
				lastTk, lastGC = now, now
			case "tick": // lastTk: the start, or the last tick
				r.ticks++
				r.worstTick = max(r.worstTick, now.Sub(lastTk))
				lastTk = now
			case "gc":
				d, _ := time.ParseDuration(arg)
				r.gcs++
				r.worstGC = max(r.worstGC, d, now.Sub(lastGC))
				lastGC = now
			case "pause": // the server has stopped ticking and collecting
				r.worstPause, _ = time.ParseDuration(arg)
				r.reported = true
				r.worstTick = max(r.worstTick, now.Sub(lastTk))
				r.worstGC = max(r.worstGC, now.Sub(lastGC))
			}
			mu.Unlock()
		}
	}()
	var a string
	select {
	case a = <-addr:
	case <-time.After(gcBound):
		t.Fatal("the server process did not start")
	}

	// The flood: connections each sending batches of pipelined lines and
	// reading the replies, from this process.
	batch := bytes.Repeat([]byte("0123456789abcdef\r\n"), 64)
	var done atomic.Bool
	var wg sync.WaitGroup
	var served atomic.Int64
	for range 4 {
		c := dial(t, a, gcBound)
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := make([]byte, len(batch))
			for !done.Load() {
				if _, err := c.Write(batch); err != nil {
					return
				}
				if _, err := io.ReadFull(c, got); err != nil {
					return
				}
				served.Add(1)
			}
		}()
	}
	time.Sleep(floodFor)
	done.Store(true)
	wg.Wait()
	require.Positive(t, served.Load(), "the loops served nothing")
	time.Sleep(idleFor)

	_ = stdin.Close() // the server reports its longest pause and exits
	select {
	case <-finished:
	case <-time.After(gcBound):
		_ = cmd.Process.Kill()
		<-finished
	}
	mu.Lock()
	defer mu.Unlock()
	if !r.reported { // stuck: the silence since the last tick, or collection
		r.worstTick = max(r.worstTick, time.Since(lastTk))
		r.worstGC = max(r.worstGC, time.Since(lastGC))
	}
	require.True(t, r.reported, "the server process never reported its pauses: its world stopped (ticks %v apart, collections %v)", r.worstTick, r.worstGC)
	return r
}

var garbage []byte

// TestLoopServerProcess is serveInProcess's server: epoll loops serving a
// lineHandler, a goroutine that allocates and sleeps a millisecond at a
// time ("tick"), and one that collects every 20 ms ("gc" and how long it
// took). When its input closes it writes its longest stop-the-world pause
// ("pause") and returns.
func TestLoopServerProcess(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("the server of serveInProcess, in a process of its own")
	}
	before := gcPauses()
	addr, _, _ := startTransport(t, Epoll, Options{BatchSyscalls: mode == "epoll+io_uring"})
	var out sync.Mutex
	say := func(format string, a ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", a...)
	}
	say("addr %s", addr)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			garbage = make([]byte, 64<<10) // so that collections come by themselves too
			say("tick")
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			start := time.Now()
			runtime.GC()
			say("gc %s", time.Since(start))
		}
	}()
	_, _ = io.Copy(io.Discard, os.Stdin)
	close(stop)
	wg.Wait()
	say("pause %s", longestNewPause(before, gcPauses()))
}

// gcWithin runs a collection, failing t if it takes gcBound.
func gcWithin(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() { runtime.GC(); close(done) }()
	select {
	case <-done:
	case <-time.After(gcBound):
		t.Fatal("garbage collection blocked by the event loops")
	}
}

const pausesMetric = "/sched/pauses/total/gc:seconds"

// gcPauses is the runtime's histogram of stop-the-world pauses so far.
func gcPauses() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: pausesMetric}}
	metrics.Read(s)
	return s[0].Value.Float64Histogram()
}

// longestNewPause bounds the longest pause counted in after but not in
// before: the upper edge of its bucket.
func longestNewPause(before, after *metrics.Float64Histogram) time.Duration {
	for i := len(after.Counts) - 1; i >= 0; i-- {
		if after.Counts[i] > before.Counts[i] {
			upper := after.Buckets[i+1]
			if math.IsInf(upper, 1) {
				return time.Duration(math.MaxInt64)
			}
			return time.Duration(upper * float64(time.Second))
		}
	}
	return 0
}

// pollBriefly (rule 6) returns at once with an event that is ready, and
// with none only after polling for spinNanos: it never sleeps in the
// kernel, and never polls for long.
func TestPollBrieflyPollsForItsSpinOnly(t *testing.T) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	require.NoError(t, err)
	defer syscall.Close(epfd)
	efd, _, errno := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	require.Zero(t, errno)
	defer syscall.Close(int(efd))
	require.NoError(t, syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, int(efd), &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(efd)}))
	events := make([]syscall.EpollEvent, 4)

	start := Nanos()
	n, en := pollBriefly(epfd, events, start, spinNanos)
	took := Nanos() - start
	require.Zero(t, en)
	require.Zero(t, n, "nothing was ready")
	require.GreaterOrEqual(t, took, int64(spinNanos), "it polled for its spin")
	require.Less(t, took, int64(time.Second), "and then returned")

	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	_, err = syscall.Write(int(efd), one)
	require.NoError(t, err)
	n, en = pollBriefly(epfd, events, Nanos(), spinNanos)
	require.Zero(t, en)
	require.Equal(t, 1, n)
	require.Equal(t, int32(efd), events[0].Fd)
}
