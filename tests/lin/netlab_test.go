package lin

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// netlab is a set of network namespaces the test creates, one per host,
// each with its own address on its loopback, joined pairwise by veth pairs
// with a /32 route each way. Cutting one pair's link parts exactly those
// two hosts.
type netlab struct {
	t      *testing.T
	prefix string         // namespace names start with it
	addr   map[string]int // host -> last octet of 10.77.0.x
}

func newNetlab(t *testing.T, hosts map[string]int, links [][2]string) *netlab {
	lab := &netlab{t: t, prefix: fmt.Sprintf("ngl%d-", os.Getpid()%10000), addr: hosts}
	t.Cleanup(lab.destroy)
	for h, octet := range hosts {
		lab.sh("ip", "netns", "add", lab.ns(h))
		lab.in(h, "ip", "link", "set", "lo", "up")
		lab.in(h, "ip", "addr", "add", fmt.Sprintf("10.77.0.%d/32", octet), "dev", "lo")
		lab.in(h, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0")
	}
	for _, l := range links {
		a, b := l[0], l[1]
		lab.sh("ip", "link", "add", lab.dev(a, b), "netns", lab.ns(a), "type", "veth", "peer", "name", lab.dev(b, a), "netns", lab.ns(b))
		lab.up(a, b)
		lab.up(b, a)
	}
	return lab
}

func (lab *netlab) ns(h string) string { return lab.prefix + h }

// dev is the name of a's end of the a-b pair (at most 15 bytes).
func (lab *netlab) dev(a, b string) string { return "v" + a + "-" + b }

// IP is host h's address.
func (lab *netlab) IP(h string) string { return fmt.Sprintf("10.77.0.%d", lab.addr[h]) }

// up brings a's end of the a-b pair up and routes b's address over it.
func (lab *netlab) up(a, b string) {
	lab.in(a, "ip", "link", "set", lab.dev(a, b), "up")
	lab.in(a, "ip", "route", "replace", lab.IP(b)+"/32", "dev", lab.dev(a, b), "src", lab.IP(a))
}

// cut takes the a-b link down; heal brings it back.
func (lab *netlab) cut(a, b string) { lab.in(a, "ip", "link", "set", lab.dev(a, b), "down") }

func (lab *netlab) heal(a, b string) {
	lab.up(a, b)
	lab.up(b, a)
}

func (lab *netlab) sh(name string, args ...string) string {
	lab.t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		lab.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// in runs a command in host h's namespace.
func (lab *netlab) in(h string, args ...string) string {
	lab.t.Helper()
	return lab.sh("ip", append([]string{"netns", "exec", lab.ns(h)}, args...)...)
}

// command is a command to start in host h's namespace.
func (lab *netlab) command(h string, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", lab.ns(h), name}, args...)...)
}

// destroy kills every process left in the namespaces and deletes them
// (not this one, whose dialing threads went into one).
func (lab *netlab) destroy() {
	self := strconv.Itoa(os.Getpid())
	for h := range lab.addr {
		out, _ := exec.Command("ip", "netns", "pids", lab.ns(h)).Output()
		for _, pid := range strings.Fields(string(out)) {
			if pid != self {
				_ = exec.Command("kill", "-9", pid).Run()
			}
		}
	}
	time.Sleep(200 * time.Millisecond)
	for h := range lab.addr {
		_ = exec.Command("ip", "netns", "del", lab.ns(h)).Run()
	}
}

// dialer dials from inside host h's namespace: the socket is made on a
// thread moved into it, and stays there.
func (lab *netlab) dialer(h string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	path := "/var/run/netns/" + lab.ns(h)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				ch <- result{nil, err}
				return
			}
			defer unix.Close(fd)
			if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
				ch <- result{nil, err}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
}
