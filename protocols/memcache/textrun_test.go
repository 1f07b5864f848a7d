package memcache

import (
	"bufio"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// textSession is one text connection: send writes req and reads n lines;
// stat reads a stats reply and returns one counter.
type textSession struct {
	t    *testing.T
	conn net.Conn
	rd   *bufio.Reader
}

func newTextSession(t *testing.T, addr string) *textSession {
	conn := dialServer(t, addr, 10*time.Second)
	return &textSession{t: t, conn: conn, rd: bufio.NewReader(conn)}
}

func (s *textSession) send(req string, n int) string {
	s.t.Helper()
	_, err := s.conn.Write([]byte(req))
	require.NoError(s.t, err)
	var b strings.Builder
	for range n {
		line, err := s.rd.ReadString('\n')
		require.NoError(s.t, err, "after %q", b.String())
		b.WriteString(line)
	}
	return b.String()
}

func (s *textSession) stat(name string) uint64 {
	s.t.Helper()
	_, err := s.conn.Write([]byte("stats\r\n"))
	require.NoError(s.t, err)
	var v uint64
	found := false
	for {
		line, err := s.rd.ReadString('\n')
		require.NoError(s.t, err)
		if line == "END\r\n" {
			break
		}
		if f := strings.Fields(line); len(f) == 3 && f[1] == name {
			v, err = strconv.ParseUint(f[2], 10, 64)
			require.NoError(s.t, err)
			found = true
		}
	}
	require.True(s.t, found, "no stat %s", name)
	return v
}

// A pipeline of one-key text gets reads as one batch, its sets among them
// store as one, and each command is answered as it would be alone, in
// order. get and gets do not share a run; a multi-key get or any other
// command ends one; and a get after a set of its key in the same pipeline
// sees the set.
func TestTextGetRuns(t *testing.T) {
	drv := &countingDriver{Driver: newEngine(t)}
	addr := startServer(t, "", drv, 64)
	c := newTextSession(t, addr)
	send := c.send

	require.Equal(t, "STORED\r\nSTORED\r\n", send("set a 1 0 2\r\nva\r\nset c 3 0 2\r\nvc\r\n", 2))
	drv.take()

	assert.Equal(t, "VALUE a 1 2\r\nva\r\nEND\r\nEND\r\nVALUE c 3 2\r\nvc\r\nEND\r\n", send("get a\r\nget b\r\nget c\r\n", 7))
	assert.Equal(t, []int{3}, drv.take(), "three gets, one batch")

	// gets shows the cas: take it from a gets alone, then compare a run's.
	one := send("gets a\r\n", 3)
	head, _, _ := strings.Cut(one, "\r\n")
	casA, ok := strings.CutPrefix(head, "VALUE a 1 2 ")
	require.True(t, ok, one)
	drv.take()
	got := send("gets a\r\ngets b\r\ngets a\r\n", 7)
	assert.Equal(t, "VALUE a 1 2 "+casA+"\r\nva\r\nEND\r\nEND\r\nVALUE a 1 2 "+casA+"\r\nva\r\nEND\r\n", got)
	assert.Equal(t, []int{3}, drv.take(), "three gets, one batch")

	// get, gets, get: three runs, each its own batch.
	got = send("get a\r\ngets a\r\nget c\r\n", 9)
	assert.Equal(t, "VALUE a 1 2\r\nva\r\nEND\r\nVALUE a 1 2 "+casA+"\r\nva\r\nEND\r\nVALUE c 3 2\r\nvc\r\nEND\r\n", got)
	assert.Equal(t, []int{1, 1, 1}, drv.take())

	// A multi-key get and a version end a run; the multi-key get is its own batch.
	got = send("get a\r\nget c\r\nget a c\r\nget b\r\nversion\r\nget c\r\n", 16)
	assert.Equal(t, "VALUE a 1 2\r\nva\r\nEND\r\nVALUE c 3 2\r\nvc\r\nEND\r\n"+
		"VALUE a 1 2\r\nva\r\nVALUE c 3 2\r\nvc\r\nEND\r\n"+
		"END\r\nVERSION test\r\nVALUE c 3 2\r\nvc\r\nEND\r\n", got)
	assert.Equal(t, []int{2, 2, 1, 1}, drv.take())

	// Sets join a run as one multi-key set; noreply hides a set's reply.
	got = send("set x 0 0 1\r\n1\r\nget a\r\nset y 0 0 1 noreply\r\n2\r\nget c\r\nset z 0 0 1\r\n3\r\n", 8)
	assert.Equal(t, "STORED\r\nVALUE a 1 2\r\nva\r\nEND\r\nVALUE c 3 2\r\nvc\r\nEND\r\nSTORED\r\n", got)
	sizes := drv.take()
	slices.Sort(sizes)
	assert.Equal(t, []int{2, 3}, sizes, "one batch of the gets, one of the sets")
	assert.Equal(t, "VALUE x 0 1\r\n1\r\nEND\r\nVALUE y 0 1\r\n2\r\nEND\r\nVALUE z 0 1\r\n3\r\nEND\r\n", send("get x\r\nget y\r\nget z\r\n", 9))
	drv.take()

	// A set between gets of its key: the gets after it see it.
	got = send("get a\r\nset a 5 0 3\r\nnew\r\nget a\r\nget c\r\n", 10)
	assert.Equal(t, "VALUE a 1 2\r\nva\r\nEND\r\nSTORED\r\nVALUE a 5 3\r\nnew\r\nEND\r\nVALUE c 3 2\r\nvc\r\nEND\r\n", got)

	// The counters count each get.
	gets, hits := c.stat("cmd_get"), c.stat("get_hits")
	send("get a\r\nget b\r\nget c\r\nget d\r\n", 8)
	assert.Equal(t, gets+4, c.stat("cmd_get"))
	assert.Equal(t, hits+2, c.stat("get_hits"))
}

// A run of text gets whose batch fails whole answers each get with the
// error: no client is left waiting for a reply.
func TestTextGetRunFailsEachGet(t *testing.T) {
	addr := startServer(t, "", failingDriver{newEngine(t)}, 64)
	got := newTextSession(t, addr).send("get a\r\nget b\r\nget c\r\nversion\r\n", 4)
	lines := strings.SplitAfter(got, "\r\n")
	for i := range 3 {
		assert.True(t, strings.HasPrefix(lines[i], "SERVER_ERROR "), "reply %d: %q", i, lines[i])
	}
	assert.Equal(t, "VERSION test\r\n", lines[3])
}
