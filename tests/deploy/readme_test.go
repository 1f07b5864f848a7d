package deploy

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tryIt returns the command lines of the README's "Try it" block.
func tryIt(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "\nTry it")
	if !ok {
		t.Fatal(`README.md has no "Try it" section`)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	if !ok {
		t.Fatal(`README.md: no sh block after "Try it"`)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal(`README.md: the "Try it" block is not closed`)
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestReadmeTryIt runs the README's "Try it" lines, as written but for the
// ports, against the binary `make run` starts (its default listeners moved
// to free ports), with sh. Every program they call must be on this
// machine: a fresh Debian machine of this project's kind (curl, not nc).
func TestReadmeTryIt(t *testing.T) {
	lines := tryIt(t)
	mc, rest := freePort(t), freePort(t)
	srv := startServer(t, nil, "serve", "--memcache", fmt.Sprintf("127.0.0.1:%d", mc), "--rest", fmt.Sprintf("127.0.0.1:%d", rest),
		"--grpc", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	srv.waitHTTP(t, &http.Client{Timeout: 5 * time.Second}, fmt.Sprintf("http://127.0.0.1:%d/readyz", rest))
	ports := strings.NewReplacer("127.0.0.1:11211", fmt.Sprintf("127.0.0.1:%d", mc), "127.0.0.1:4406", fmt.Sprintf("127.0.0.1:%d", rest))
	want := [][]string{
		{"STORED\r\n", "VALUE hello 0 5\r\nworld\r\nEND\r\n"},
		{"world\n"},
		{`ndbgate_requests_total{`, `command="get"`, `outcome="ok"`, `protocol="memcache"`, "} 1\n"},
	}
	if len(lines) != len(want) {
		t.Fatalf("the Try it block has %d commands, the test knows %d: %q", len(lines), len(want), lines)
	}
	for i, line := range lines {
		for _, prog := range programs(line) {
			if prog == "nc" || prog == "netcat" || prog == "telnet" {
				t.Errorf("%q uses %s, which a fresh machine lacks", line, prog)
			}
			if _, err := exec.LookPath(prog); err != nil {
				t.Errorf("%q: %s is not installed", line, prog)
			}
		}
		cmd := exec.Command("sh", "-c", ports.Replace(line))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%q: %v\n%s", line, err, out)
			continue
		}
		for _, w := range want[i] {
			if !strings.Contains(string(out), w) {
				t.Errorf("%q printed %q, without %q", line, out, w)
			}
		}
		t.Logf("%s\n%s", line, out)
	}
	srv.stop(t)
}

// programs are the first words of a shell line's pipeline and list
// elements (enough for the README's one-liners).
func programs(line string) []string {
	var out []string
	for _, part := range strings.FieldsFunc(line, func(r rune) bool { return r == '|' || r == ';' || r == '&' }) {
		if f := strings.Fields(part); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}
