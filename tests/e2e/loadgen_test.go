package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoadGenerator runs bench/cmd/ndbgate-bench for a second per protocol
// against a started ndbgate: it connects, drives the protocol and writes a
// valid JSON report with no errors. A smoke test: nothing here judges speed.
func TestLoadGenerator(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ndbgate-bench")
	build := exec.Command("go", "build", "-o", bin, "./bench/cmd/ndbgate-bench")
	build.Dir = repoRoot
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	grpcAddr := freePort(t)
	s := startServer(t, "--grpc", grpcAddr)
	for _, tc := range []struct {
		proto, addr string
		batch       int
	}{
		{"memcache-text", s.memcacheAddr, 1},
		{"memcache-text", s.memcacheAddr, 10},
		{"memcache-binary", s.memcacheAddr, 1},
		{"memcache-binary", s.memcacheAddr, 10},
		{"rest-pkread", s.restAddr, 1},
		{"rest-batch", s.restAddr, 10},
		{"rest-kv", s.restAddr, 1},
		{"rest-kv", s.restAddr, 10},
		{"grpc-kv", grpcAddr, 1},
		{"grpc-kv", grpcAddr, 10},
		{"grpc-rondb", grpcAddr, 1},
		{"grpc-rondb", grpcAddr, 10},
	} {
		t.Run(tc.proto+"/batch"+strconv.Itoa(tc.batch), func(t *testing.T) {
			report := filepath.Join(t.TempDir(), "report.json")
			cmd := exec.Command(bin, "-proto", tc.proto, "-addr", tc.addr, "-conns", "2", "-pipeline", "2",
				"-batch", strconv.Itoa(tc.batch), "-keys", "200", "-preload", "-ratio", "1:4",
				"-duration", "1s", "-warmup", "100ms", "-server-pid", strconv.Itoa(s.pid()), "-json", report)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			b, err := os.ReadFile(report)
			require.NoError(t, err)
			var rep struct {
				Proto    string  `json:"proto"`
				Batch    int     `json:"batch"`
				Ops      int64   `json:"ops"`
				KeysRead int64   `json:"keys_read"`
				Hits     int64   `json:"hits"`
				Errors   int64   `json:"errors"`
				FirstErr string  `json:"first_error"`
				OpsPerS  float64 `json:"ops_per_s"`
				Latency  struct {
					P50, P99 float64
				} `json:"latency_us"`
				Server *struct {
					CPUS float64 `json:"cpu_s"`
				} `json:"server"`
			}
			require.NoError(t, json.Unmarshal(b, &rep), "%s", b)
			assert.Equal(t, tc.proto, rep.Proto)
			assert.Equal(t, tc.batch, rep.Batch)
			assert.Positive(t, rep.Ops)
			assert.Zero(t, rep.Errors, rep.FirstErr)
			assert.Positive(t, rep.KeysRead)
			assert.Equal(t, rep.KeysRead, rep.Hits, "every key was preloaded")
			assert.Positive(t, rep.Latency.P50)
			assert.GreaterOrEqual(t, rep.Latency.P99, rep.Latency.P50)
			require.NotNil(t, rep.Server)
		})
	}
}
