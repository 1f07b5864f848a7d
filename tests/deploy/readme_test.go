package deploy

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ndbgate/ndbgate/tests/internal/harness"
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

// guideCommands are the command lines of deploy/README.md's sh blocks,
// continuation lines joined.
func guideCommands(t *testing.T) []string {
	t.Helper()
	guide, err := os.ReadFile(filepath.Join(repoRoot, "deploy/README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	parts := strings.Split(string(guide), "```sh\n")
	for i, part := range parts[1:] {
		block, _, ok := strings.Cut(part, "```")
		if !ok {
			t.Fatalf("deploy/README.md: sh block %d is not closed", i+1)
		}
		cur := ""
		for _, l := range strings.Split(block, "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			if strings.HasSuffix(l, `\`) {
				cur += strings.TrimSuffix(l, `\`)
				continue
			}
			cmds = append(cmds, cur+l)
			cur = ""
		}
	}
	return cmds
}

// guideNotRun are the guide's commands TestDeployGuideCommands does not
// run, by prefix, with the test that runs them (or their equivalent).
var guideNotRun = map[string]string{
	"deploy/image/build.sh registry.example.com/": "pushes to a registry; TestDeployGuidePodman runs deploy/image/build.sh",
	"deploy/image/build.sh":                       "TestDeployGuidePodman",
	"podman run ":                                 "TestDeployGuidePodman",
	"podman volume create ndbgate-sock":           "TestDeployGuidePodman",
	"helm install":                                "needs a Kubernetes cluster; the same values go through helm template here",
	"podman kube play":                            "TestPodmanKubePlay plays the same rendering (REST on a free port, an app image of its own)",
	"podman start kp-ndbgate-sidecar-pod-0-":      "TestPodmanKubePlay starts ndbgate first so",
	"podman pod start":                            "TestPodmanKubePlay starts the app after ndbgate's startup probe",
	"curl -s http://127.0.0.1:4406/readyz":        "TestPodmanKubePlay runs the probes against the Pod",
	"podman kube down":                            "TestPodmanKubePlay takes the Pod down so",
}

// TestDeployGuideCommands runs deploy/README.md's helm and promtool
// commands as pasted (helm and promtool from bin/tools on PATH, files they
// write put in a temporary directory): each succeeds, and what helm renders
// decodes strictly. Every other command of the guide must be listed in
// guideNotRun with what runs it instead. And helm template without
// --kube-version, as a newcomer first types it, fails saying what to add.
func TestDeployGuideCommands(t *testing.T) {
	helm := helmBin(t)
	promtool := promtoolBin(t)
	path := filepath.Dir(helm) + string(os.PathListSeparator) + filepath.Dir(promtool) + string(os.PathListSeparator) + os.Getenv("PATH")
	dir := t.TempDir()
	ran := 0
	for _, line := range guideCommands(t) {
		prog := strings.Fields(line)[0]
		if prog != "helm" && prog != "bin/tools/promtool" || strings.HasPrefix(line, "helm install") {
			found := false
			for prefix := range guideNotRun {
				if strings.HasPrefix(line, prefix) {
					found = true
				}
			}
			if !found {
				t.Errorf("deploy/README.md: %q is neither run by this test nor listed in guideNotRun", line)
			}
			continue
		}
		// Files the command writes go to the temporary directory.
		cmdLine := regexp.MustCompile(`>\s*(\S+)`).ReplaceAllStringFunc(line, func(m string) string {
			return "> " + filepath.Join(dir, strings.TrimSpace(strings.TrimPrefix(m, ">")))
		})
		cmd := exec.Command("sh", "-c", cmdLine)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "PATH="+path)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Errorf("%q: %v\n%s", line, err, stderr.String())
			continue
		}
		ran++
		out := stdout.String()
		if m := regexp.MustCompile(`>\s*(\S+)`).FindStringSubmatch(line); m != nil {
			b, err := os.ReadFile(filepath.Join(dir, m[1]))
			if err != nil {
				t.Fatal(err)
			}
			out = string(b)
		}
		if prog == "helm" {
			objs, err := decodeManifests(out)
			if err != nil || len(objs) == 0 {
				t.Errorf("%q: %d objects, %v", line, len(objs), err)
			}
			if strings.Contains(line, "prometheusRule.enabled=true") && !strings.Contains(out, "kind: PrometheusRule") {
				t.Errorf("%q rendered no PrometheusRule", line)
			}
		} else if !strings.Contains(out, "SUCCESS") {
			t.Errorf("%q printed %q", line, out)
		}
		t.Logf("ran %s", line)
	}
	if ran < 4 {
		t.Errorf("ran %d of the guide's commands: the helm template and promtool ones are gone", ran)
	}

	// The first try, without --kube-version.
	out, err := run(t, time.Minute, helm, "template", "myapp", chartDir)
	if err == nil {
		t.Fatalf("helm template without --kube-version rendered (for Kubernetes 1.20):\n%s", out)
	}
	if !strings.Contains(out, "add --kube-version") || !strings.Contains(out, "Kubernetes 1.30 or later") {
		t.Errorf("helm template without --kube-version fails without saying what to do:\n%s", out)
	}
	t.Logf("helm template without --kube-version: %s", strings.SplitN(strings.TrimSpace(out), "\n", 2)[0])
}

// TestDeployGuidePodman runs deploy/README.md's image commands as pasted but
// for the image's tag, the container's and volume's names and the host
// ports (not to clash with the machine's own), the app (the reader's
// my-app is sockclient here), and the options this machine's podman needs
// (podmanRunOptions). The image is built; run in the foreground it serves
// memcache and /readyz on the published ports and stops on SIGTERM; run
// detached with the socket's volume, an app container with ndbgate's group
// stores and reads back an item through the socket.
func TestDeployGuidePodman(t *testing.T) {
	podman := podmanBin(t)
	var lines []string
	for _, l := range guideCommands(t) {
		if l == "deploy/image/build.sh" || strings.HasPrefix(l, "deploy/image/build.sh ") && !strings.Contains(l, "registry.example.com") ||
			strings.HasPrefix(l, "podman run ") || strings.HasPrefix(l, "podman volume create ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 5 {
		t.Fatalf("deploy/README.md's image commands changed (%d, this test knows 5): %q", len(lines), lines)
	}
	suffix := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	tag := "localhost/ndbgate:guide-" + suffix
	mc, rest := freePort(t), freePort(t)
	names := strings.NewReplacer(
		"127.0.0.1:11211:11211", fmt.Sprintf("127.0.0.1:%d:11211", mc),
		"127.0.0.1:4406:4406", fmt.Sprintf("127.0.0.1:%d:4406", rest),
		"ndbgate-sock", "ndbgate-guide-sock-"+suffix,
		"--name ndbgate ", "--name ndbgate-guide-"+suffix+" ",
	)
	image := func(l string) string {
		// The image is the last word of a podman run line, or build.sh's tag.
		return regexp.MustCompile(`localhost/ndbgate$`).ReplaceAllString(l, tag)
	}
	sh := func(line string) *exec.Cmd {
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "VERSION=deploy-test")
		return cmd
	}

	// Build.
	build := strings.TrimSpace(strings.SplitN(lines[0], "#", 2)[0]) + " " + tag
	if out, err := sh(build).CombinedOutput(); err != nil {
		t.Fatalf("%q: %v\n%s", build, err, out)
	}
	t.Cleanup(func() { _, _ = run(t, time.Minute, podman, "rmi", "-f", tag) })
	opts := strings.Join(podmanRunOptions(t, podman, tag), " ")
	withOpts := func(l string) string { return strings.Replace(l, "podman run ", "podman run "+opts+" ", 1) }

	// In the foreground, on the published ports; SIGTERM stops it.
	fg := withOpts(image(names.Replace(lines[1])))
	cmd := sh("exec " + fg)
	logs := &harness.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	gone := func() error {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("podman run exited (%v)", err)
		default:
			return nil
		}
	}
	waitOK(t, &http.Client{Timeout: 2 * time.Second}, fmt.Sprintf("http://127.0.0.1:%d/readyz", rest), logs.String, gone)
	memcacheRoundTrip(t, "tcp", fmt.Sprintf("127.0.0.1:%d", mc), "guide", "pasted")
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%q after SIGTERM: %v\n%s", fg, err, logs)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Errorf("%q did not stop within 20 s of SIGTERM\n%s", fg, logs)
	}
	t.Logf("ran %s", fg)

	// Beside an app, sharing the socket's volume.
	appImage := "localhost/ndbgate-deploy-test-app:guide-" + suffix
	ctx := openTempDir(t)
	copyFile(t, sockClientBinary(t), filepath.Join(ctx, "sockclient"), 0o755)
	if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte("FROM scratch\nCOPY sockclient /sockclient\nENTRYPOINT [\"/sockclient\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 2*time.Minute, podman, "build", "-q", "-t", appImage, ctx)
	t.Cleanup(func() { _, _ = run(t, time.Minute, podman, "rmi", "-f", appImage) })
	vol, ctr := "ndbgate-guide-sock-"+suffix, "ndbgate-guide-"+suffix
	t.Cleanup(func() {
		_, _ = run(t, time.Minute, podman, "rm", "-f", "-t", "0", ctr)
		_, _ = run(t, time.Minute, podman, "volume", "rm", "-f", vol)
	})
	for _, l := range lines[2:4] {
		l = withOpts(image(names.Replace(l)))
		if out, err := sh(l).CombinedOutput(); err != nil {
			t.Fatalf("%q: %v\n%s", l, err, out)
		}
		t.Logf("ran %s", l)
	}
	app := withOpts(strings.Replace(names.Replace(lines[4]), " my-app", " "+appImage+" -unix /run/ndbgate/memcache.sock -key guide -value from-the-app", 1))
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := sh(app).CombinedOutput()
		if err == nil && strings.Contains(string(out), `stored and read back "from-the-app"`) {
			t.Logf("ran %s: %s", app, strings.TrimSpace(string(out)))
			break
		}
		if time.Now().After(deadline) {
			ctrLogs, _ := run(t, time.Minute, podman, "logs", ctr)
			t.Fatalf("%q: %v\n%s\nndbgate:\n%s", app, err, out, ctrLogs)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
