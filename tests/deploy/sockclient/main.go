// Command sockclient is the application of the deploy tests' Pods: it
// stores and reads back one item over memcache on a unix socket (or TCP),
// and exits 0 only if the value came back. It runs as the app's user in the
// chart's Pod emulation, and as the app container of the podman tests
// (with -every, as a long-lived app in the Pod podman kube play runs).
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
	every := flag.Duration("every", 0, "run as a long-lived app: a round trip every interval, forever, reporting each (failures too)")
	flag.Parse()
	network, addr := "unix", *unix
	if addr == "" {
		network, addr = "tcp", *tcp
	}
	for n := 1; *every > 0; n++ {
		if err := roundTrip(network, addr, *key, *value); err != nil {
			fmt.Printf("sockclient: round trip %d: %v\n", n, err)
		} else {
			fmt.Printf("sockclient: round trip %d: %s %s: stored and read back %q\n", n, network, addr, *value)
		}
		time.Sleep(*every)
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
