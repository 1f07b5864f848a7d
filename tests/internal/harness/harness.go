// Package harness is what the end-to-end suites (tests/e2e, tests/deploy)
// share: finding the repository, building the ndbgate binary they run, and
// collecting a child process's output. Each suite keeps what differs: how
// it starts and stops servers, and which ports it takes.
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// RepoRoot is ndbgate's repository: the nearest directory at or above the
// working directory that holds cmd/ndbgate.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for range 10 {
		if _, err := os.Stat(filepath.Join(dir, "cmd", "ndbgate")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", errors.New("cmd/ndbgate not found above the test directory")
}

// Binary is the ndbgate a suite runs, or why it has none.
type Binary struct {
	Path string
	Err  error
}

// Require fails the test when the binary is not available.
func (b *Binary) Require(t testing.TB) {
	t.Helper()
	if b.Err != nil {
		t.Fatalf("ndbgate binary not available: %v", b.Err)
	}
}

// Build builds root's ./cmd/ndbgate into dir/ndbgate with `go build args...`
// and env added to this process's environment, in 5 minutes at most. A
// failed build is the binary's Err, also printed to stderr after suite
// (the suite's name), so that the tests that need the binary fail with it
// and the others still run.
func Build(suite, root, dir string, env []string, args ...string) *Binary {
	b := &Binary{Path: filepath.Join(dir, "ndbgate")}
	if b.Err = build(root, b.Path, env, args); b.Err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", suite, b.Err)
	}
	return b
}

func build(root, out string, env, args []string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("go tool not found: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, append(append([]string{"build", "-o", out}, args...), "./cmd/ndbgate")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/ndbgate: %v\n%s", err, out)
	}
	return nil
}

// InCI reports whether a missing tool must fail a test rather than skip it
// (CI=true): CI installs every tool the suites need.
func InCI() bool { return os.Getenv("CI") == "true" }

// SyncBuffer collects a child's output; safe for concurrent use.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
