//go:build !race

package memcache

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/internal/shardmetrics"
)

// Once warm, serving a command and flushing its reply allocates nothing, in
// each dialect, on the embedded engine (the race detector's sync.Pool drops
// items at random, hence the build tag).
func TestServeDoesNotAllocate(t *testing.T) {
	srv := NewServer(Config{Version: "test"}, newDemoService(t, newEngine(t)), discardLog)
	getk := append(appendBinHeader(nil, opGetK, 3, 0, 0, 3, 7, 0), "key"...)
	getk[0] = binReqMagic
	for _, tc := range []struct {
		name string
		cmd  []byte
	}{
		{"text get", []byte("get key\r\n")},
		{"text set", []byte("set key 0 0 5\r\nvalue\r\n")},
		{"text incr", []byte("incr n 1\r\n")},
		{"meta get", []byte("mg key v f t\r\n")},
		{"binary getk", getk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &discardTransport{}
			cs := srv.newConnState(tr, shardmetrics.SharedShard, nil)
			for _, setup := range []string{"set key 0 0 5\r\nvalue\r\n", "set n 0 0 1\r\n0\r\n"} {
				if cs.proto == protoUnknown && tc.cmd[0] == binReqMagic {
					break // a binary connection: the text setup went on another
				}
				require.Equal(t, len(setup), cs.serve([]byte(setup)))
				cs.flush()
			}
			if tc.cmd[0] == binReqMagic {
				cs = srv.newConnState(tr, shardmetrics.SharedShard, nil)
			}
			serve := func() {
				if n := cs.serve(tc.cmd); n != len(tc.cmd) {
					t.Fatalf("served %d of %d bytes", n, len(tc.cmd))
				}
				cs.flush()
			}
			for range 100 {
				serve() // warm: pendings, buffers and the engine's rows made
			}
			before := tr.n
			require.Zero(t, testing.AllocsPerRun(200, serve))
			require.Greater(t, tr.n, before, "no replies")
		})
	}
}
