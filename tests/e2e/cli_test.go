package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runCLI runs the binary to completion (at most 15s) and returns its exit code,
// stdout and stderr. A process still running at the deadline fails the test.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	requireBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ndbgateBin, args...)
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("ndbgate %q still running after 15s (killed)\nstdout: %s\nstderr: %s", args, stdout.String(), stderr.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("ndbgate %q: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

var reVersionLine = regexp.MustCompile(`^ndbgate (\S+)`)

// TestCLIVersion: `ndbgate version` prints "ndbgate <version> ...", and the
// memcache `version` command reports the same version as 1.6.0-ndbgate-<version>.
func TestCLIVersion(t *testing.T) {
	code, stdout, stderr := runCLI(t, "version")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	m := reVersionLine.FindStringSubmatch(stdout)
	require.NotNil(t, m, "version output %q", stdout)
	assert.Equal(t, 1, strings.Count(stdout, "\n"), "one line expected: %q", stdout)

	s := startServer(t)
	c := dialRaw(t, s.memcacheAddr)
	c.roundTrip("version\r\n", "VERSION 1.6.0-ndbgate-"+m[1]+"\r\n")
}

// TestCLIBadInvocations: bad flags, bad values and bad config files exit with
// code 2 and a message on stderr naming what is wrong, without serving.
func TestCLIBadInvocations(t *testing.T) {
	unknownTop := writeFile(t, "unknown-top.yaml", "embeded:\n  memory_limit: 2m\n")
	unknownNested := writeFile(t, "unknown-nested.yaml", "embedded:\n  memory_limt: 2m\n")
	unknownPrefixKey := writeFile(t, "unknown-prefix-key.yaml", oomConfig+"    colour: blue\n")
	badYAML := writeFile(t, "bad.yaml", "embedded: [unclosed\n")
	cases := []struct {
		name string
		args []string
		want []string // each must appear in stderr
	}{
		{"no command", nil, []string{"usage"}},
		{"unknown command", []string{"frobnicate"}, []string{"frobnicate"}},
		{"unknown flag", []string{"serve", "--bogus"}, []string{"bogus"}},
		{"item size max too small", []string{"serve", "--item-size-max", "12"}, []string{"item-size-max"}},
		{"item size max not a size", []string{"serve", "--item-size-max", "big"}, []string{"item-size-max"}},
		{"memcache address nonsense", []string{"serve", "--memcache", "nonsense"}, []string{"memcache"}},
		{"rest address nonsense", []string{"serve", "--rest", "nonsense"}, []string{"rest"}},
		{"memory limit below 1m", []string{"serve", "--memory-limit", "512k"}, []string{"memory"}},
		{"log level unknown", []string{"serve", "--log-level", "loud"}, []string{"log"}},
		{"fsync unknown", []string{"serve", "--fsync", "sometimes"}, []string{"--fsync", "always, everysec or no"}},
		{"snapshot log size tiny", []string{"serve", "--snapshot-log-size", "4k"}, []string{"--snapshot-log-size"}},
		{"data dir with a cluster", []string{"serve", "--data-dir", "/tmp/x", "--ndb-connectstring", "mgm:1186"}, []string{"--data-dir"}},
		{"max connections negative", []string{"serve", "--max-connections", "-1"}, []string{"connections"}},
		{"unknown top-level key", []string{"serve", "--config", unknownTop}, []string{"embeded"}},
		{"unknown nested key", []string{"serve", "--config", unknownNested}, []string{"memory_limt"}},
		{"unknown key in a key prefix", []string{"serve", "--config", unknownPrefixKey}, []string{"colour"}},
		{"invalid yaml", []string{"serve", "--config", badYAML}, []string{"bad.yaml"}},
		{"missing config file", []string{"serve", "--config", "/nonexistent/ndbgate.yaml"}, []string{"/nonexistent/ndbgate.yaml"}},
		{"ndbmemcache reload interval too long", []string{"serve", "--ndbmemcache-role", "db-only", "--ndbmemcache-reload-interval", "2h"}, []string{"--ndbmemcache-reload-interval", "0..1h"}},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			args := tc.args
			if len(args) > 0 && args[0] == "serve" {
				// Should validation wrongly pass, serve on free ports rather than
				// on the defaults, and let runCLI's deadline catch it.
				args = append(append([]string{}, args...), "--grpc", "")
				if !containsArg(args, "--memcache") {
					args = append(args, "--memcache", freePort(t))
				}
				if !containsArg(args, "--rest") {
					args = append(args, "--rest", freePort(t))
				}
			}
			code, stdout, stderr := runCLI(t, args...)
			assert.Equal(t, 2, code, "exit code\nstdout: %s\nstderr: %s", stdout, stderr)
			assert.NotEmpty(t, strings.TrimSpace(stderr), "no message on stderr")
			for _, w := range tc.want {
				assert.Contains(t, strings.ToLower(stderr), strings.ToLower(w), "stderr should name %q", w)
			}
		})
	}
}

func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a || strings.HasPrefix(x, a+"=") {
			return true
		}
	}
	return false
}

// TestSIGINT: an interrupt is a clean shutdown too (exit 0); SIGTERM is
// checked by every test's cleanup.
func TestSIGINT(t *testing.T) {
	s := startServer(t)
	c := dialRaw(t, s.memcacheAddr)
	c.roundTrip("set sig 0 0 1\r\nx\r\n", "STORED\r\n")
	s.stopped = true
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		t.Fatalf("ndbgate did not exit within %v of SIGINT", stopTimeout)
	}
	assert.Equal(t, 0, s.cmd.ProcessState.ExitCode(), "exit code after SIGINT")
}

// TestCLINdbmemcacheRoleWithoutItsSchema: a role is read from ndbmemcache's
// schema at start-up; without it, ndbgate does not serve, and says what to load.
func TestCLINdbmemcacheRoleWithoutItsSchema(t *testing.T) {
	code, stdout, stderr := runCLI(t, "serve", "--ndbmemcache-role", "db-only", "--memcache", freePort(t), "--rest", freePort(t), "--grpc", "")
	assert.NotEqual(t, 0, code, "stdout: %s\nstderr: %s", stdout, stderr)
	for _, w := range []string{`ndbmemcache.role (--ndbmemcache-role) "db-only"`, "ndbmemcache.meta", "ndb_memcache_metadata.sql"} {
		assert.Contains(t, stderr, w)
	}
}

// NDBGATE_TEST_LIVE_FLAGS reach every server but a gnet one's
// --memcache-busy-poll, which it would refuse at start-up.
func TestLiveFlagsLeaveGnetUnpolled(t *testing.T) {
	t.Setenv("NDBGATE_TEST_LIVE_FLAGS", "--ndb-busy-poll 200us --memcache-busy-poll 50us --memcache-busy-poll=50us")
	all := []string{"--ndb-busy-poll", "200us", "--memcache-busy-poll", "50us", "--memcache-busy-poll=50us"}
	assert.Equal(t, all, liveFlags(nil))
	assert.Equal(t, all, liveFlags([]string{"--memcache-io-uring=false"}))
	assert.Equal(t, []string{"--ndb-busy-poll", "200us"}, liveFlags([]string{"--memcache-event-loop", "gnet", "--log-level", "warn"}))
	assert.Equal(t, []string{"--ndb-busy-poll", "200us"}, liveFlags([]string{"--memcache-event-loop=gnet"}))
}
