package ndbmemcache

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Large values written by one server are read by the other: ndbmemcache
// and ndbgate keep demo_ext's values in the same rows and external_values
// parts, so either can take over the other's items. Each step's value says
// where its bytes are, so a part out of place shows.
func TestLargeValuesAcrossServers(t *testing.T) {
	e := testEnv(t)
	nm, gw := startNdbmemcache(t, e, "default_role"), startNdbgate(t, e, "default_role")
	defer nm.stop(false)
	defer gw.stop(false)
	base := "b:cross" + strconv.FormatInt(time.Now().Unix()%100000, 10) + "_"
	value := func(tag string, n int) string {
		var b strings.Builder
		for b.Len() < n {
			fmt.Fprintf(&b, "%s%d.", tag, b.Len())
		}
		return b.String()[:n]
	}
	for _, x := range []struct {
		name           string
		writer, reader *server
		n              int
	}{
		{"nm-writes-2001", nm, gw, 2001},
		{"nm-writes-100000", nm, gw, 100000},
		{"gw-writes-2001", gw, nm, 2001},
		{"gw-writes-500000", gw, nm, 500000},
	} {
		t.Run(x.name, func(t *testing.T) {
			key, v := base+x.name, value(x.name+":", x.n)
			w, r := dial(t, x.writer), dial(t, x.reader)
			w.do(t, fmt.Sprintf("set %s 5 0 %d\r\n%s\r\n", key, len(v), v), "STORED\r\n")
			got, ok := r.get(t, key)
			require.True(t, ok, "%s reads what %s wrote", x.reader.name, x.writer.name)
			assert.True(t, got == v, "%s read %d bytes of %d written by %s", x.reader.name, len(got), len(v), x.writer.name)

			// The reader replaces it, longer; the writer reads that.
			v2 := value("again:", x.n+20000)
			r.do(t, fmt.Sprintf("set %s 6 0 %d\r\n%s\r\n", key, len(v2), v2), "STORED\r\n")
			got, ok = w.get(t, key)
			require.True(t, ok)
			assert.True(t, got == v2, "%s read %d bytes of %d written by %s", x.writer.name, len(got), len(v2), x.reader.name)

			// Appended to by one, read by the other; deleted by the first.
			w.do(t, fmt.Sprintf("append %s 0 0 5\r\ntail!\r\n", key), "STORED\r\n")
			got, _ = r.get(t, key)
			assert.True(t, got == v2+"tail!", "%s read %d bytes after %s appended", x.reader.name, len(got), x.writer.name)
			w.do(t, "delete "+key+"\r\n", "DELETED\r\n")
			_, ok = r.get(t, key)
			assert.False(t, ok, "deleted through %s", x.writer.name)
		})
	}
}

type textConn struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, s *server) *textConn {
	c, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &textConn{c: c, r: bufio.NewReaderSize(c, 1<<16)}
}

func (c *textConn) line(t *testing.T) string {
	require.NoError(t, c.c.SetReadDeadline(time.Now().Add(10*time.Second)))
	l, err := c.r.ReadString('\n')
	require.NoError(t, err)
	return l
}

// do sends cmd and wants one reply line.
func (c *textConn) do(t *testing.T, cmd, want string) {
	t.Helper()
	_, err := io.WriteString(c.c, cmd)
	require.NoError(t, err)
	require.Equal(t, want, c.line(t))
}

// get is key's value, and whether it was there.
func (c *textConn) get(t *testing.T, key string) (string, bool) {
	t.Helper()
	_, err := io.WriteString(c.c, "get "+key+"\r\n")
	require.NoError(t, err)
	head := c.line(t)
	if head == "END\r\n" {
		return "", false
	}
	f := strings.Fields(head)
	require.Len(t, f, 4, "%q", head)
	n, err := strconv.Atoi(f[3])
	require.NoError(t, err)
	buf := make([]byte, n+2)
	_, err = io.ReadFull(c.r, buf)
	require.NoError(t, err)
	require.Equal(t, "END\r\n", c.line(t))
	return string(buf[:n]), true
}
