package e2e

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// statusBytes is a size field of /proc/<pid>/status (VmRSS, VmHWM), in bytes.
func statusBytes(t *testing.T, pid int, field string) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// rssBytes is a process's resident set size.
func rssBytes(t *testing.T, pid int) int64 { return statusBytes(t, pid, "VmRSS") }

// peakRSS is a process's peak resident set size.
func peakRSS(t *testing.T, pid int) int64 { return statusBytes(t, pid, "VmHWM") }

// TestStalledValuesStayWithinABudget: 150 clients each start a 1 MB set, send
// all but the end of its value, and stall. Before values still arriving had
// a budget, the real binary held them all: 311 MB of RSS under
// --memory-limit 64m (memcached -m 64: 71 MB). Now the sets past the budget
// (a quarter of the limit) are refused as memcached refuses a value it has no
// memory for, other clients are served meanwhile, and RSS stays bounded.
func TestStalledValuesStayWithinABudget(t *testing.T) {
	embeddedOnly(t, "the budget follows the embedded engine's memory limit")
	s := startServer(t, "--memory-limit", "64m")
	const clients, value = 150, 1_048_000
	data := strings.Repeat("s", value-2) // the last 2 bytes and the \r\n never come
	var wg sync.WaitGroup
	refused := make(chan string, clients)
	conns := make([]net.Conn, clients)
	for i := range conns {
		c, err := net.Dial("tcp", s.memcacheAddr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		conns[i] = c
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := fmt.Fprintf(c, "set stalled%d 0 0 %d\r\n%s", i, value, data); err != nil {
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			if line, err := bufio.NewReader(c).ReadString('\n'); err == nil {
				refused <- line
			}
		}(i)
	}
	wg.Wait()
	close(refused)
	n := 0
	for line := range refused {
		assert.Equal(t, "SERVER_ERROR out of memory storing object\r\n", line)
		n++
	}
	assert.Greater(t, n, clients/2, "most of the stalled sets were refused, not held")

	// Others are served meanwhile.
	mc := dialRaw(t, s.memcacheAddr)
	mc.roundTrip("set fine 0 0 2\r\nok\r\n", "STORED\r\n")
	mc.roundTrip("get fine\r\n", "VALUE fine 0 2\r\nok\r\nEND\r\n")

	rss := rssBytes(t, s.pid())
	t.Logf("%d stalled 1 MB sets, %d refused: RSS %d MiB", clients, n, rss>>20)
	assert.Less(t, rss, int64(128<<20), "values still arriving must stay within their budget")
}
