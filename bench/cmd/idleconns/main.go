// Command idleconns opens connections to a memcache server and holds them
// idle, for bench/connscale.sh: what idle connections cost a server, and
// whether they slow the active ones. Each connection sends "version" once
// and reads the reply, so that the server has taken it on and served it,
// and then stays open, silent, until the process is told to stop (SIGTERM,
// SIGINT, or its standard input closing). It prints "ready N" once all are
// open.
//
//	idleconns -addr 127.0.0.1:11211 -n 10000
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:11211", "the server's memcache address")
	n := flag.Int("n", 1000, "connections to open and hold")
	par := flag.Int("parallel", 64, "connections opened at once")
	flag.Parse()
	if err := raiseFileLimit(*n + 64); err != nil {
		fmt.Fprintf(os.Stderr, "idleconns: %v\n", err)
		os.Exit(1)
	}
	conns, err := open(*addr, *n, *par)
	if err != nil {
		fmt.Fprintf(os.Stderr, "idleconns: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("ready %d\n", len(conns))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); stop <- syscall.SIGTERM }()
	<-stop
	for _, c := range conns {
		_ = c.Close()
	}
}

// open dials n connections, par at a time, each answering "version".
func open(addr string, n, par int) ([]net.Conn, error) {
	conns := make([]net.Conn, n)
	errs := make(chan error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				c, err := dial(addr)
				if err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
					continue
				}
				conns[i] = c
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
		return nil, err
	}
	return conns, nil
}

func dial(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("version\r\n")); err != nil {
		_ = c.Close()
		return nil, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "VERSION ") {
		_ = c.Close()
		return nil, fmt.Errorf("version: %q, %v", line, err)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// raiseFileLimit raises the soft limit on open files to at least want.
func raiseFileLimit(want int) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur >= uint64(want) {
		return nil
	}
	if l.Max < uint64(want) {
		return fmt.Errorf("open files: the hard limit is %d, below the %d needed (ulimit -Hn)", l.Max, want)
	}
	l.Cur = uint64(want)
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}
