package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ndbgate/ndbgate/protocols/grpc/kvpb"
)

// storeBig stores a value of n bytes under key and returns it.
func storeBig(t *testing.T, addr, key string, n int) string {
	t.Helper()
	v := strings.Repeat(key[:1], n)
	c := dialRaw(t, addr)
	defer c.close()
	c.roundTrip(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", key, n, v), "STORED\r\n")
	return v
}

// readGetReply reads one text get reply of values, up to END, and returns
// the values in order.
func readGetReply(t *testing.T, r *bufio.Reader) []string {
	t.Helper()
	var vals []string
	for {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		if line == "END\r\n" {
			return vals
		}
		f := strings.Fields(line)
		require.Len(t, f, 4, "line %q", line)
		n, err := strconv.Atoi(f[3])
		require.NoError(t, err)
		b := make([]byte, n+2)
		_, err = io.ReadFull(r, b)
		require.NoError(t, err)
		vals = append(vals, string(b[:n]))
	}
}

// TestRepliesToANonReadingClientStayBounded: a client stores a 1 MB value,
// pipelines 400 gets of it (4.8 KB) and reads nothing. Before, ndbgate ran
// every get it had read and held all their replies: RSS went from 23 MB to
// 1,447 MB (memcached: 21 MB). Now it stops taking commands while the client
// is not reading, so the replies it holds stay near its output bound; when
// the client reads, every reply comes, whole and in order.
func TestRepliesToANonReadingClientStayBounded(t *testing.T) {
	embeddedOnly(t, "values of 1 MB (NDB's demo_table holds 13500 bytes)")
	s := startServer(t)
	const value, gets = 1 << 20, 400
	v := storeBig(t, s.memcacheAddr, "big", value)

	c, err := net.Dial("tcp", s.memcacheAddr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.(*net.TCPConn).SetReadBuffer(64<<10))
	_, err = c.Write([]byte(strings.Repeat("get big\r\n", gets)))
	require.NoError(t, err)
	time.Sleep(time.Second) // the server does what it will with the client not reading

	other := dialRaw(t, s.memcacheAddr)
	other.roundTrip("set other 0 0 1\r\nx\r\n", "STORED\r\n")
	stalled := peakRSS(t, s.pid())
	t.Logf("peak RSS with %d gets of 1 MB unread: %d MiB", gets, stalled>>20)
	assert.Less(t, stalled, int64(128<<20), "replies to a client that does not read must stay bounded")

	r := bufio.NewReaderSize(c, 1<<20)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(60*time.Second)))
	for i := 0; i < gets; i++ {
		vals := readGetReply(t, r)
		require.Len(t, vals, 1, "reply %d", i)
		require.True(t, vals[0] == v, "reply %d: wrong value", i)
	}
}

// TestALargeMultiGetStreams: one get of the same 1 MB key 300 times is a
// 300 MB reply. Before, ndbgate built it whole (RSS 1,267 MB; memcached 22
// MB). Now it reads the keys in pieces and sends each before reading more, so
// its peak RSS stays bounded while a slow client reads it all.
func TestALargeMultiGetStreams(t *testing.T) {
	embeddedOnly(t, "values of 1 MB (NDB's demo_table holds 13500 bytes)")
	s := startServer(t)
	const value, keys = 1 << 20, 300
	v := storeBig(t, s.memcacheAddr, "huge", value)
	c, err := net.Dial("tcp", s.memcacheAddr)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("get" + strings.Repeat(" huge", keys) + " nothere\r\nget huge\r\n"))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(60*time.Second)))
	r := bufio.NewReaderSize(c, 64<<10)
	vals := readGetReply(t, r)
	require.Len(t, vals, keys, "every hit, and END once after the last piece")
	for i := range vals {
		require.True(t, vals[i] == v, "value %d", i)
	}
	require.Equal(t, []string{v}, readGetReply(t, r), "the next command's reply follows")
	peak := peakRSS(t, s.pid())
	t.Logf("peak RSS for a get of %d x 1 MB: %d MiB", keys, peak>>20)
	assert.Less(t, peak, int64(256<<20), "a large multi-get must not be built whole")
}

// TestLargeAPIMultiGetsStayBounded: a REST _mget of 256 keys of 1 MB built a
// 256 MB body in memory (1.29 GB RSS for one request). Now its keys are read
// in pieces and its body streams; a gRPC MultiGet, whose reply must be one
// message, is refused with ResourceExhausted past the message limit instead
// of being built.
func TestLargeAPIMultiGetsStayBounded(t *testing.T) {
	embeddedOnly(t, "values of 1 MB (NDB's demo_table holds 13500 bytes)")
	grpcAddr := freePort(t)
	s := startServer(t, "--grpc", grpcAddr)
	const value, keys = 1 << 20, 256
	v := storeBig(t, s.memcacheAddr, "rest", value)

	body := `{"keys":[` + strings.TrimSuffix(strings.Repeat(`"rest",`, keys-1)+`"nothere",`, ",") + `]}`
	resp, err := http.Post("http://"+s.restAddr+"/v1/kv/default/_mget", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var got struct {
		Items []struct {
			Key   string `json:"key"`
			Found bool   `json:"found"`
			Value string `json:"value"`
		} `json:"items"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	require.Len(t, got.Items, keys)
	for i, it := range got.Items[:keys-1] {
		require.True(t, it.Found && it.Key == "rest" && it.Value == v, "item %d", i)
	}
	assert.Equal(t, "nothere", got.Items[keys-1].Key)
	assert.False(t, got.Items[keys-1].Found)
	peak := peakRSS(t, s.pid())
	t.Logf("peak RSS for an _mget of %d x 1 MB: %d MiB", keys-1, peak>>20)
	assert.Less(t, peak, int64(256<<20), "an _mget must not be built whole")

	kv := kvpb.NewKVClient(dialGRPC(t, grpcAddr, nil))
	few := &kvpb.MultiGetRequest{Keys: [][]byte{[]byte("rest"), []byte("rest"), []byte("nothere")}}
	r, err := kv.MultiGet(context.Background(), few)
	require.NoError(t, err, "3 MB fit in a message")
	require.Len(t, r.Items, 3)
	assert.True(t, r.Items[1].Found && string(r.Items[1].Value) == v)
	many := &kvpb.MultiGetRequest{}
	for i := 0; i < 10; i++ {
		many.Keys = append(many.Keys, []byte("rest"))
	}
	_, err = kv.MultiGet(context.Background(), many)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "ask for fewer keys")
}
