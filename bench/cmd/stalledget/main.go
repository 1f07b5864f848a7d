// Command stalledget measures what a data node that stops answering costs a
// gateway's other requests, for bench/stalled-node.sh. It stores -keys keys
// through a memcache server, then runs -c connections, each sending one get
// at a time. After -warm it stops the process -pid (a data node) with
// SIGSTOP for -stop, resumes it, and after -after stops the load. It prints
// the gets completed in the stop's window against those of an equal window
// just before it, how many connections were served in the window, and the
// longest wait between two replies of a connection (median and largest).
//
// With -fixed each connection gets one key of its own, so that about half
// of them read a key on the stopped node and the rest read keys that need
// only the other one: what the gateway makes of those shows. With random
// keys nearly every connection soon asks for a key on the stopped node.
//
//	stalledget -addr 127.0.0.1:11211 -c 32 -fixed -pid 1234 -stop 1s
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:11211", "the server's memcache address")
	conns := flag.Int("c", 32, "connections, each one get at a time")
	keys := flag.Int("keys", 10000, "keys stored and read")
	fixed := flag.Bool("fixed", false, "each connection reads one key of its own")
	pid := flag.Int("pid", 0, "the process to stop (0: none, a baseline)")
	stop := flag.Duration("stop", time.Second, "how long the process is stopped")
	warm := flag.Duration("warm", 2*time.Second, "load before the stop")
	after := flag.Duration("after", 2*time.Second, "load after the stop")
	flag.Parse()
	if *conns < 1 || *keys < *conns {
		fail(errors.New("-c must be at least 1 and -keys at least -c"))
	}
	if err := store(*addr, *keys); err != nil {
		fail(err)
	}
	l := &load{replies: make([][]time.Time, *conns), errs: make([]int, *conns), quit: make(chan struct{})}
	cs := make([]net.Conn, *conns)
	for i := range cs {
		c, err := net.Dial("tcp", *addr)
		if err != nil {
			fail(err)
		}
		cs[i] = c
		l.wg.Add(1)
		go l.run(i, c, *keys, *fixed)
	}
	time.Sleep(*warm)
	t0 := time.Now()
	if *pid > 0 {
		if err := syscall.Kill(*pid, syscall.SIGSTOP); err != nil {
			fail(fmt.Errorf("stopping %d: %w", *pid, err))
		}
	}
	time.Sleep(*stop)
	if *pid > 0 {
		if err := syscall.Kill(*pid, syscall.SIGCONT); err != nil {
			fail(fmt.Errorf("resuming %d: %w", *pid, err))
		}
	}
	t1 := time.Now()
	time.Sleep(*after)
	close(l.quit)
	for _, c := range cs { // a get still unanswered by then ends the run
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	}
	l.wg.Wait()
	if l.failed != nil {
		fail(l.failed)
	}
	l.report(t0, t1)
}

// load is the connections' record: each one's reply times and error replies.
type load struct {
	replies [][]time.Time
	errs    []int
	quit    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	failed  error // a connection that broke
}

func (l *load) run(i int, c net.Conn, keys int, fixed bool) {
	defer l.wg.Done()
	r := bufio.NewReader(c)
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	for {
		select {
		case <-l.quit:
			return
		default:
		}
		k := i
		if !fixed {
			k = rng.IntN(keys)
		}
		if _, err := fmt.Fprintf(c, "get stalled:%d\r\n", k); err != nil {
			l.broke(err)
			return
		}
		ok, err := readGet(r)
		if err != nil {
			l.broke(err) // or a get still unanswered 10 s after the run
			return
		}
		if !ok {
			l.errs[i]++
		}
		l.replies[i] = append(l.replies[i], time.Now())
	}
}

func (l *load) broke(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed == nil {
		l.failed = err
	}
}

// readGet reads one get's reply: false for an error reply or a miss (every
// key was stored).
func readGet(r *bufio.Reader) (bool, error) {
	hit := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return false, err
		}
		switch {
		case line == "END\r\n":
			return hit, nil
		case strings.HasPrefix(line, "VALUE "):
			hit = true
			if _, err := r.ReadString('\n'); err != nil { // the value: no CR LF in it
				return false, err
			}
		default: // SERVER_ERROR, CLIENT_ERROR, ERROR
			return false, nil
		}
	}
}

func (l *load) report(t0, t1 time.Time) {
	window := t1.Sub(t0)
	before, during, served, errs := 0, 0, 0, 0
	var gaps []time.Duration
	for i, ts := range l.replies {
		errs += l.errs[i]
		n := 0
		prev, gap := t0.Add(-window), time.Duration(0)
		for _, t := range ts {
			switch {
			case t.Before(t0.Add(-window)):
				continue
			case t.Before(t0):
				before++
			case t.Before(t1):
				during++
				n++
			}
			gap = max(gap, t.Sub(prev))
			prev = t
		}
		if n > 0 {
			served++
		}
		gaps = append(gaps, gap)
	}
	slices.Sort(gaps)
	fmt.Printf("before %d during %d share %.3f served %d of %d longest-wait p50 %.3f s max %.3f s errors %d\n",
		before, during, float64(during)/float64(max(before, 1)), served, len(l.replies),
		gaps[len(gaps)/2].Seconds(), gaps[len(gaps)-1].Seconds(), errs)
}

// store sets every key through one connection and waits for the last reply.
func store(addr string, keys int) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	w := bufio.NewWriter(c)
	for i := range keys {
		fmt.Fprintf(w, "set stalled:%d 0 0 8 noreply\r\nvalue%03d\r\n", i, i%1000)
	}
	fmt.Fprintf(w, "version\r\n")
	if err := w.Flush(); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "VERSION") {
		return fmt.Errorf("storing the keys: %q", strings.TrimSpace(line))
	}
	return nil
}

func fail(err error) {
	if errors.Is(err, io.EOF) {
		err = errors.New("the server closed a connection")
	}
	fmt.Fprintf(os.Stderr, "stalledget: %v\n", err)
	os.Exit(1)
}
