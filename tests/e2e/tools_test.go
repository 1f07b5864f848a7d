package e2e

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPymemcache runs tests/python (pytest + pymemcache) against the server.
// Without python3, pytest or pymemcache it skips, except with CI=true, where it
// fails.
func TestPymemcache(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		skipOrFailMissing(t, "python3 not on PATH")
	}
	{
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, python, "-c", "import pymemcache, pytest, pylibmc, meta_memcache").CombinedOutput()
		cancel()
		if err != nil {
			skipOrFailMissing(t, "python3 cannot import pymemcache, pylibmc, meta_memcache and pytest (pip install -r tests/python/requirements.txt): %v\n%s", err, out)
		}
	}
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, python, "-m", "pytest", "-q", "-p", "no:cacheprovider", filepath.Join("tests", "python"))
		cmd.Dir = repoRoot
		cmd.Env = toolEnv(onNDB(tg), "NDBGATE_MEMCACHE="+tg.addr, "PYTHONDONTWRITEBYTECODE=1")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		t.Logf("pytest output against %s:\n%s", tg.name, out.String())
		require.NoError(t, ctx.Err(), "pytest timed out")
		require.NoError(t, err, "pytest failed against %s", tg.name)
		assert.Regexp(t, regexp.MustCompile(`(?m)^\d+ passed`), out.String(), "pytest summary")
		if onNDB(tg) {
			// One client parses cas as 32-bit, and ndbgate's cas on NDB is
			// wider (test_meta_memcache.py says why).
			assert.Regexp(t, regexp.MustCompile(`(?m)^\d+ passed, 1 skipped`), out.String(), "only the one NDB skip")
		} else {
			assert.NotContains(t, out.String(), "skipped", "no test may be skipped when the server is given")
		}
	})
}

// libmemcached 1.x's memccapable has 27 ASCII tests and 27 binary ones.
const (
	memccapableASCIITests  = 27
	memccapableBinaryTests = 27
)

var (
	reCapableASCII  = regexp.MustCompile(`(?m)^ascii .*\[pass\]$`)
	reCapableBinary = regexp.MustCompile(`(?m)^binary .*\[pass\]$`)
	reCapableFail   = regexp.MustCompile(`(?m)^.*\[FAIL\]$`)
	reCapableSkip   = regexp.MustCompile(`(?m)^.*\[skip\]$`)
)

func TestMemccapable(t *testing.T) {
	bin, err := exec.LookPath("memccapable")
	if err != nil {
		skipOrFailMissing(t, "memccapable not on PATH (Debian package libmemcached-tools)")
	}
	for _, mode := range []struct {
		name          string
		args          []string
		ascii, binary int
	}{
		{"ascii (-a)", []string{"-a"}, memccapableASCIITests, 0},
		{"ascii and binary", nil, memccapableASCIITests, memccapableBinaryTests},
	} {
		t.Run(mode.name, func(t *testing.T) {
			forEachTarget(t, func(t *testing.T, tg *target) {
				host, port, err := net.SplitHostPort(tg.addr)
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				args := append(append([]string{}, mode.args...), "-t", "5", "-h", host, "-p", port)
				cmd := exec.CommandContext(ctx, bin, args...)
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				runErr := cmd.Run()
				text := out.String()
				t.Logf("memccapable %v against %s:\n%s", mode.args, tg.name, text)
				require.NoError(t, ctx.Err(), "memccapable timed out")
				assert.Equal(t, mode.ascii, len(reCapableASCII.FindAllString(text, -1)), "memccapable ASCII tests passed")
				assert.Equal(t, mode.binary, len(reCapableBinary.FindAllString(text, -1)), "memccapable binary tests passed")
				assert.Equal(t, 0, len(reCapableFail.FindAllString(text, -1)), "memccapable tests failed")
				assert.Equal(t, 0, len(reCapableSkip.FindAllString(text, -1)), "memccapable tests skipped")
				assert.Contains(t, text, "All tests passed")
				assert.NoError(t, runErr, "memccapable exit status")
				if tg.srv != nil {
					assert.True(t, tg.srv.alive(), "ndbgate died during memccapable")
				}
				// Afterwards the server still serves.
				c := dialRaw(t, tg.addr)
				c.roundTrip("set after:capable 0 0 2\r\nok\r\n", "STORED\r\n")
				c.roundTrip("get after:capable\r\n", "VALUE after:capable 0 2\r\nok\r\nEND\r\n")
			})
		})
	}
}

// TestMemjs runs tests/node (node --test with memjs, a binary-protocol client
// that also does SASL) against memcached and ndbgate, then against an ndbgate
// that requires SASL. Without node or tests/node/node_modules it skips, except
// with CI=true.
func TestMemjs(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFailMissing(t, "node not on PATH")
	}
	dir := filepath.Join(repoRoot, "tests", "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "memjs")); err != nil {
		skipOrFailMissing(t, "memjs not installed (npm ci --prefix tests/node): %v", err)
	}
	run := func(t *testing.T, ndb bool, env ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "--test", "memjs.test.js")
		cmd.Dir = dir
		cmd.Env = toolEnv(ndb, env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		t.Logf("node --test output:\n%s", out.String())
		require.NoError(t, ctx.Err(), "node timed out")
		require.NoError(t, err, "memjs tests failed")
		assert.Regexp(t, `(?m)^# fail 0$`, out.String())
		assert.NotRegexp(t, `(?m)^# pass 0$`, out.String())
	}
	forEachTarget(t, func(t *testing.T, tg *target) {
		run(t, onNDB(tg), "NDBGATE_MEMCACHE="+tg.addr)
	})
	t.Run("ndbgate-sasl", func(t *testing.T) {
		creds := filepath.Join(t.TempDir(), "users")
		require.NoError(t, os.WriteFile(creds, []byte("node:s3cret\n"), 0o600))
		s := startServer(t, "--memcache-sasl-credentials", creds)
		run(t, liveCluster() != "", "NDBGATE_MEMCACHE="+s.memcacheAddr, "NDBGATE_SASL=node:s3cret")
		assert.NotContains(t, s.output.String(), "s3cret", "passwords are never logged")
	})
}
