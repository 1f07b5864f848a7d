package memcache

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A set refused as too large drops the old item before it is answered, as
// memcached's does: a client that reads the key again, from another
// connection too, never gets the value it meant to replace. On NDB the
// unlink completes later than the refusal is made, so the refusal must wait
// for it (gomemcache closes its connection after the server error and reads
// on a new one; tests/e2e found the old value on ndbmtd).
func TestRefusedSetUnlinksBeforeItIsAnswered(t *testing.T) {
	drv, svc := heldService(t, ndbclient.DispatchConfig{Lanes: true})
	srv := NewServer(Config{MaxPending: 1024, MaxPendingKeys: 4096, ItemSizeMax: 1024, Version: "test"}, svc, discardLog)
	settle := func(cs *connState) {
		for drv.Pending() {
			drv.Release()
		}
		cs.flush()
	}

	for _, tc := range []struct{ name, header string }{
		{"text", "set %s 0 0 2048\r\n"},
		{"meta", "ms %s 2048\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "tl:" + tc.name
			tooLarge := fmt.Sprintf(tc.header, key) + strings.Repeat("x", 2048) + "\r\n"
			a, ra := recordedConn(srv)
			require.Empty(t, serveAll(a, []byte("set "+key+" 0 0 3\r\nold\r\n")))
			settle(a)
			require.Equal(t, "STORED\r\n", string(ra.out))
			ra.out = nil

			require.Empty(t, serveAll(a, []byte(tooLarge)))
			a.flush()
			assert.Empty(t, string(ra.out), "the refusal waits for the unlink in flight")
			require.True(t, drv.Pending(), "the unlink is in flight")
			settle(a)
			assert.Equal(t, "SERVER_ERROR object too large for cache\r\n", string(ra.out))

			b, rb := recordedConn(srv)
			require.Empty(t, serveAll(b, []byte("get "+key+"\r\n")))
			settle(b)
			assert.Equal(t, "END\r\n", string(rb.out), "the old value is gone")
		})
	}
}
