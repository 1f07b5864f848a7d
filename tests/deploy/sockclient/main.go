// Command sockclient is the application of the deploy tests' Pods: it
// stores and reads back one item over memcache on a unix socket (or TCP),
// and exits 0 only if the value came back. It runs as the app's user in the
// chart's Pod emulation, and as the app container of the podman test.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

func main() {
	unix := flag.String("unix", "", "memcache unix socket")
	tcp := flag.String("tcp", "", "memcache host:port (when -unix is empty)")
	key := flag.String("key", "sidecar", "key")
	value := flag.String("value", "hello from the app", "value")
	flag.Parse()
	network, addr := "unix", *unix
	if addr == "" {
		network, addr = "tcp", *tcp
	}
	if err := roundTrip(network, addr, *key, *value); err != nil {
		fmt.Fprintf(os.Stderr, "sockclient: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("sockclient: %s %s: stored and read back %q\n", network, addr, *value)
}

func roundTrip(network, addr, key, value string) error {
	c, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(c, "set %s 0 0 %d\r\n%s\r\nget %s\r\n", key, len(value), value, key); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	for _, want := range []string{"STORED", fmt.Sprintf("VALUE %s 0 %d", key, len(value)), value, "END"} {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("reading %q: %w", want, err)
		}
		if got := strings.TrimRight(line, "\r\n"); got != want {
			return fmt.Errorf("got %q, want %q", got, want)
		}
	}
	return nil
}
