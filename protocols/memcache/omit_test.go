package memcache

import (
	"bufio"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// readColumns records which of the cas and expire columns each read names:
// "c" and "e" for each present, "-" for neither.
type readColumns struct {
	ndbclient.Driver
	mu    sync.Mutex
	reads []string
}

func (d *readColumns) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	d.mu.Lock()
	for _, op := range b.Ops {
		if op.Kind != ndbclient.OpRead {
			continue
		}
		seen := ""
		for _, col := range op.Read {
			switch col {
			case op.Table.ColumnIndex("cas_value"): // the demo table's
				seen += "c"
			case op.Table.ExpireColumn:
				seen += "e"
			}
		}
		if seen == "" {
			seen = "-"
		}
		d.reads = append(d.reads, seen)
	}
	d.mu.Unlock()
	d.Driver.Submit(b, done)
}

func (d *readColumns) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.reads
	d.reads = nil
	return out
}

// TestGetsReadWhatTheirRepliesUse: each kind of get reads the cas and expire
// columns only when its reply shows them, and the replies that show them are
// right. A run of quiet mgs reads what any of them needs.
func TestGetsReadWhatTheirRepliesUse(t *testing.T) {
	drv := &readColumns{Driver: newEngine(t)}
	addr := startServer(t, "", drv, 64)
	conn := dialServer(t, addr, 10*time.Second)
	rd := bufio.NewReader(conn)
	send := func(s string) {
		_, err := conn.Write([]byte(s))
		require.NoError(t, err)
	}
	lines := func(n int) string {
		var b strings.Builder
		for range n {
			line, err := rd.ReadString('\n')
			require.NoError(t, err)
			b.WriteString(line)
		}
		return b.String()
	}

	send("set k 7 3600 2\r\nhi\r\n")
	require.Equal(t, "STORED\r\n", lines(1))
	send("mg k c\r\n")
	reply := lines(1)
	require.True(t, strings.HasPrefix(reply, "HD c"), reply)
	cas := strings.TrimSpace(strings.TrimPrefix(reply, "HD c"))
	require.NotEqual(t, "0", cas)
	drv.take()

	for _, tc := range []struct {
		req   string
		lines int
		want  []string // the reply's lines, as prefixes
		reads []string
	}{
		{"get k\r\n", 3, []string{"VALUE k 7 2\r\n", "hi\r\n", "END\r\n"}, []string{"-"}},
		{"gets k\r\n", 3, []string{"VALUE k 7 2 " + cas + "\r\n", "hi\r\n", "END\r\n"}, []string{"c"}},
		{"mg k v f\r\n", 2, []string{"VA 2 f7\r\n", "hi\r\n"}, []string{"-"}},
		{"mg k c\r\n", 1, []string{"HD c" + cas + "\r\n"}, []string{"c"}},
		{"mg k C" + cas + " v\r\n", 1, []string{"HD\r\n"}, []string{"c"}}, // C: the value only if changed
		{"mg k t\r\n", 1, []string{"HD t3"}, []string{"e"}},
		{"me k\r\n", 1, []string{"ME k exp=3"}, []string{"ce"}},
		// A quiet run: one batch, read as the mg that needs the most.
		{"mg k v q\r\nmg k c q\r\nmg k t q\r\nmn\r\n", 5, []string{"VA 2\r\n", "hi\r\n", "HD c" + cas + "\r\n", "HD t3", "MN\r\n"}, []string{"ce", "ce", "ce"}},
		{"mg k v q\r\nmg k s q\r\nmn\r\n", 4, []string{"VA 2\r\n", "hi\r\n", "HD s2\r\n", "MN\r\n"}, []string{"-", "-"}},
	} {
		send(tc.req)
		got := strings.SplitAfter(lines(tc.lines), "\n")
		got = got[:len(got)-1]
		require.Len(t, got, len(tc.want), "%q", tc.req)
		for i, w := range tc.want {
			assert.True(t, strings.HasPrefix(got[i], w), "%q: line %d is %q, want %q", tc.req, i, got[i], w)
		}
		assert.Equal(t, tc.reads, drv.take(), "%q: cas (c) and expire (e) read", tc.req)
	}

	// Binary gets read the cas (their header has it), not the expiry.
	bc := dialServer(t, addr, 10*time.Second)
	_, err := bc.Write(append(binReq(opGetKQ, []byte("k"), nil, nil, 1, 0), binReq(opGet, []byte("k"), nil, nil, 2, 0)...))
	require.NoError(t, err)
	for _, opaque := range []uint32{1, 2} {
		r := readResp(t, bc)
		assert.Equal(t, opaque, r.opaque)
		assert.Equal(t, "hi", string(r.vb))
		assert.Equal(t, cas, strconv.FormatUint(r.cas, 10))
	}
	assert.Equal(t, []string{"c", "c"}, drv.take(), "binary gets")
}
