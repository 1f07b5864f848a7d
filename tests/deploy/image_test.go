package deploy

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"

	"github.com/ndbgate/ndbgate/tests/internal/harness"
)

const (
	imageDockerfile = "deploy/image/Dockerfile"
	ndbDockerfile   = "deploy/compose/Dockerfile"
	imageUser       = "65532:65532"
	socketPath      = "/run/ndbgate/memcache.sock"
)

// imageConfig is what `podman image inspect` says of an image.
type imageConfig struct {
	Size   int64
	Config struct {
		User         string
		Entrypoint   []string
		Cmd          []string
		Env          []string
		Volumes      map[string]struct{}
		ExposedPorts map[string]struct{}
		StopSignal   string
		Labels       map[string]string
	}
}

// parseDockerfile parses a Dockerfile with BuildKit's parser (what
// `docker build` uses) and runs its linter (`docker build --check`): a
// syntax error or any lint warning fails.
func parseDockerfile(t *testing.T, path string) []instructions.Stage {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, w := range res.Warnings {
		t.Errorf("%s: parser warning: %s", path, w.Short)
	}
	var lints []string
	lint := linter.New(&linter.Config{Warn: func(rule, desc, url, msg string, loc []parser.Range) {
		lints = append(lints, fmt.Sprintf("%s: %s (line %v)", rule, msg, loc))
	}})
	stages, _, err := instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, l := range lints {
		t.Errorf("%s: lint: %s", path, l)
	}
	return stages
}

// checkFinalStage checks the conventions both images share, on the
// Dockerfile's last stage: non-root, NDBGATE_* listeners on every address,
// the socket in a volume, the entrypoint and its serve command.
func checkFinalStage(t *testing.T, path string, stages []instructions.Stage) {
	t.Helper()
	if len(stages) == 0 {
		t.Fatalf("%s: no stages", path)
	}
	final := stages[len(stages)-1]
	var user string
	env := map[string]string{}
	var volumes, entrypoint, cmd []string
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				env[kv.Key] = kv.Value
			}
		case *instructions.VolumeCommand:
			volumes = append(volumes, c.Volumes...)
		case *instructions.EntrypointCommand:
			entrypoint = c.CmdLine
			if c.PrependShell {
				t.Errorf("%s: ENTRYPOINT in shell form: signals would go to a shell", path)
			}
		case *instructions.CmdCommand:
			cmd = c.CmdLine
		}
	}
	if user != imageUser {
		t.Errorf("%s: USER %q, want %s", path, user, imageUser)
	}
	for k, v := range map[string]string{
		"NDBGATE_MEMCACHE": "0.0.0.0:11211", "NDBGATE_REST": "0.0.0.0:4406", "NDBGATE_GRPC": "0.0.0.0:5406",
		"NDBGATE_MEMCACHE_SOCKET": socketPath,
	} {
		if env[k] != v {
			t.Errorf("%s: ENV %s=%q, want %q", path, k, env[k], v)
		}
	}
	if !slices.Contains(volumes, filepath.Dir(socketPath)) {
		t.Errorf("%s: VOLUME %v lacks %s", path, volumes, filepath.Dir(socketPath))
	}
	if !slices.Equal(entrypoint, []string{"/usr/local/bin/ndbgate"}) || !slices.Equal(cmd, []string{"serve", "--memcache-socket-mode=0770"}) {
		t.Errorf("%s: ENTRYPOINT %q CMD %q", path, entrypoint, cmd)
	}
}

func TestDockerfiles(t *testing.T) {
	for _, path := range []string{imageDockerfile, ndbDockerfile} {
		t.Run(filepath.Base(filepath.Dir(path)), func(t *testing.T) {
			checkFinalStage(t, path, parseDockerfile(t, path))
		})
	}
	// The default image pulls nothing.
	if st := parseDockerfile(t, imageDockerfile); len(st) != 1 || st[0].BaseName != "scratch" {
		t.Errorf("%s: want one stage FROM scratch", imageDockerfile)
	}
}

// TestNDBImage builds the NDB image as far as this machine allows.
func TestNDBImage(t *testing.T) {
	podman := podmanBin(t)
	stages := parseDockerfile(t, ndbDockerfile)
	base := stages[0].BaseName
	if _, err := run(t, time.Minute, podman, "image", "exists", base); err == nil {
		t.Fatalf("%s is present here: build %s for real and extend this test", base, ndbDockerfile)
	}
	out, err := run(t, 2*time.Minute, podman, "build", "--pull=never", "-f", ndbDockerfile, "-t", "localhost/ndbgate-ndb:deploy-test", ".")
	if err == nil {
		t.Fatalf("podman build of %s succeeded without its base image?\n%s", ndbDockerfile, out)
	}
	// podman read both stages and stopped at the first FROM.
	if !strings.Contains(out, fmt.Sprintf("[1/%d] STEP 1/", len(stages))) || !strings.Contains(out, base+": image not known") {
		t.Fatalf("podman build of %s failed other than for its base image:\n%s", ndbDockerfile, out)
	}
	t.Skipf("%s: parsed and linted (BuildKit), read by podman build (%d stages), not built: its base image %s cannot be pulled here (no registry access)",
		ndbDockerfile, len(stages), base)
}

// TestImage builds the default image with deploy/image/build.sh, checks its
// configuration and contents, runs the binary it holds, and runs the image
// under podman with an app container beside it.
func TestImage(t *testing.T) {
	podman := podmanBin(t)
	const tag = "localhost/ndbgate:deploy-test"
	start := time.Now()
	cmd := exec.Command(filepath.Join(repoRoot, "deploy/image/build.sh"), tag)
	cmd.Env = append(os.Environ(), "IMAGE_TOOL="+podman, "VERSION=deploy-test")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy/image/build.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = run(t, time.Minute, podman, "rmi", "-f", tag) })
	t.Logf("image built in %v", time.Since(start).Round(100*time.Millisecond))

	var inspected []imageConfig
	if err := json.Unmarshal([]byte(mustRun(t, time.Minute, podman, "image", "inspect", tag)), &inspected); err != nil || len(inspected) != 1 {
		t.Fatalf("podman image inspect: %v", err)
	}
	img := inspected[0]
	cfg := img.Config
	t.Logf("image size %d bytes (%.1f MiB)", img.Size, float64(img.Size)/(1<<20))
	if img.Size > 40<<20 {
		t.Errorf("image is %d bytes: more than a static binary", img.Size)
	}
	if cfg.User != imageUser {
		t.Errorf("User %q, want %s", cfg.User, imageUser)
	}
	if !slices.Equal(cfg.Entrypoint, []string{"/usr/local/bin/ndbgate"}) || !slices.Equal(cfg.Cmd, []string{"serve", "--memcache-socket-mode=0770"}) {
		t.Errorf("Entrypoint %q Cmd %q", cfg.Entrypoint, cfg.Cmd)
	}
	if _, ok := cfg.Volumes["/run/ndbgate"]; !ok {
		t.Errorf("Volumes %v lack /run/ndbgate", cfg.Volumes)
	}
	var ports []string
	for p := range cfg.ExposedPorts {
		ports = append(ports, p)
	}
	sort.Strings(ports)
	if !slices.Equal(ports, []string{"11211/tcp", "4406/tcp", "5406/tcp"}) {
		t.Errorf("ExposedPorts %v", ports)
	}
	if cfg.Labels["org.opencontainers.image.version"] != "deploy-test" {
		t.Errorf("version label %q", cfg.Labels["org.opencontainers.image.version"])
	}
	env := map[string]string{}
	for _, kv := range cfg.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if env["NDBGATE_MEMCACHE_SOCKET"] != socketPath || env["NDBGATE_REST"] != "0.0.0.0:4406" {
		t.Errorf("Env %v", cfg.Env)
	}

	bin := checkImageContents(t, podman, tag)
	t.Run("extracted-binary", func(t *testing.T) { runExtracted(t, bin, cfg.Env, append(cfg.Entrypoint[1:], cfg.Cmd...)) })
	t.Run("podman-run", func(t *testing.T) { runImage(t, podman, tag) })
	t.Run("memory-sizing", func(t *testing.T) { runSized(t, podman, tag) })
}

// checkImageContents exports the image's filesystem, checks it holds the
// static binary and nothing else of note, and returns the binary's path.
func checkImageContents(t *testing.T, podman, tag string) string {
	t.Helper()
	name := fmt.Sprintf("ndbgate-deploy-export-%d", os.Getpid())
	mustRun(t, time.Minute, podman, "create", "--name", name, tag)
	defer run(t, time.Minute, podman, "rm", "-f", "-v", name)
	cmd := exec.Command(podman, "export", name)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("podman export: %v\n%s", err, stderr.String())
	}
	dir := openTempDir(t)
	bin := filepath.Join(dir, "ndbgate")
	var files []string
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		switch {
		case h.Typeflag == tar.TypeReg:
			files = append(files, name)
			if h.Uid != 0 || h.Mode&0o022 != 0 {
				t.Errorf("%s: owner %d, mode %o: the user could change it", name, h.Uid, h.Mode)
			}
			if name == "usr/local/bin/ndbgate" {
				f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.Copy(f, tr); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
		case h.Typeflag == tar.TypeDir && strings.TrimSuffix(name, "/") == "run/ndbgate":
			if fmt.Sprintf("%d:%d", h.Uid, h.Gid) != imageUser {
				t.Errorf("/run/ndbgate owned by %d:%d: the user cannot make its socket there", h.Uid, h.Gid)
			}
		}
	}
	sort.Strings(files)
	if want := []string{"etc/group", "etc/passwd", "usr/local/bin/ndbgate"}; !slices.Equal(files, want) {
		t.Errorf("image files %v, want %v", files, want)
	}
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("the image's ndbgate: %v", err)
	}
	defer ef.Close()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the image's ndbgate has a dynamic loader (PT_INTERP): not static, and scratch has no libc")
		}
	}
	if libs, _ := ef.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the image's ndbgate needs %v", libs)
	}
	out2, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out2), "ndbgate deploy-test") || !strings.Contains(string(out2), "drivers: embedded") {
		t.Errorf("the image's ndbgate version: %v %s", err, out2)
	}
	return bin
}

// runExtracted runs the image's binary with the image's Env and Cmd (as its
// user, when the test is root), its listeners moved to loopback ports and
// its socket directory to a temporary one, as a container runtime would
// present them.
func runExtracted(t *testing.T, bin string, imageEnv, args []string) {
	dir := openTempDir(t)
	sockDir := filepath.Join(dir, "run-ndbgate")
	if err := os.Mkdir(sockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	mc, rest := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	var env []string
	for _, kv := range imageEnv {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "NDBGATE_MEMCACHE":
			v = mc
		case "NDBGATE_REST":
			v = rest
		case "NDBGATE_GRPC":
			v = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		case "NDBGATE_MEMCACHE_SOCKET":
			v = filepath.Join(sockDir, filepath.Base(v))
		}
		env = append(env, k+"="+v)
	}
	var attr *syscall.SysProcAttr
	if os.Geteuid() == 0 {
		var uid, gid uint32
		fmt.Sscanf(imageUser, "%d:%d", &uid, &gid)
		chownMode(t, sockDir, int(uid), int(gid), 0o755)
		attr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{gid}}}
	}
	srv := startServerWith(t, bin, env, attr, args...)
	client := &http.Client{Timeout: 5 * time.Second}
	srv.waitHTTP(t, client, "http://"+rest+"/readyz")
	srv.waitHTTP(t, client, "http://"+rest+"/healthz")
	sock := filepath.Join(sockDir, "memcache.sock")
	if st, err := os.Stat(sock); err != nil || st.Mode().Perm() != 0o770 {
		t.Errorf("socket %s: %v, mode %v; want 0770", sock, err, st.Mode())
	}
	memcacheRoundTrip(t, "unix", sock, "image-sock", "v1")
	memcacheRoundTrip(t, "tcp", mc, "image-tcp", "v2")
	if !strings.Contains(srv.log.String(), `"msg":"ndbgate ready"`) {
		t.Errorf("NDBGATE_LOG_FORMAT=json: the log is not JSON:\n%s", srv.log)
	}
	srv.stop(t)
}

// podmanRunOptions finds options under which podman can run a container
// here. This machine's limits refuse podman's defaults: crun cannot raise
// RLIMIT_NOFILE/NPROC past the hard limits (no CAP_SYS_RESOURCE), and does
// not run on a hybrid cgroup v1/v2 host; runc, given the machine's own
// limits, does.
func podmanRunOptions(t *testing.T, podman, tag string) []string {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	nofile := fmt.Sprintf("nofile=%d:%d", lim.Max, lim.Max)
	// RLIMIT_NPROC (6): lowering it is always allowed.
	if err := syscall.Getrlimit(6, &lim); err != nil {
		t.Fatal(err)
	}
	nproc := fmt.Sprintf("nproc=%d:%d", min(lim.Max, 4096), min(lim.Max, 4096))
	ulimits := []string{"--ulimit", nofile, "--ulimit", nproc}
	attempts := [][]string{nil, ulimits}
	_, runcErr := exec.LookPath("runc")
	if runcErr == nil {
		attempts = append(attempts, append([]string{"--runtime", "runc"}, ulimits...))
	}
	var failures []string
	for _, opts := range attempts {
		args := append(append([]string{"run", "--rm", "--network", "none"}, opts...), tag, "version")
		out, err := run(t, 2*time.Minute, podman, args...)
		if err == nil && strings.Contains(out, "ndbgate deploy-test") {
			t.Logf("podman runs containers here with %q", opts)
			return opts
		}
		failures = append(failures, fmt.Sprintf("podman %s: %v: %s", strings.Join(opts, " "), err, strings.TrimSpace(out)))
	}
	if runcErr != nil && harness.InCI() {
		t.Fatalf("podman cannot run containers with crun here, and runc is not installed (scripts/install-test-deps.sh installs it):\n%s", strings.Join(failures, "\n"))
	}
	t.Skipf("podman cannot run containers on this machine (the image's contents and its binary were tested above):\n%s", strings.Join(failures, "\n"))
	return nil
}

// runImage runs the image as a sidecar: ndbgate with a named volume at
// /run/ndbgate, read-only, no capabilities, on the host's loopback, and an
// app container (another user, with ndbgate's group, as the Pod's fsGroup
// gives it) using the socket through the same volume.
func runImage(t *testing.T, podman, tag string) {
	opts := podmanRunOptions(t, podman, tag)
	suffix := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	vol, ctr := "ndbgate-deploy-sock-"+suffix, "ndbgate-deploy-"+suffix
	mustRun(t, time.Minute, podman, "volume", "create", vol)
	t.Cleanup(func() { _, _ = run(t, time.Minute, podman, "volume", "rm", "-f", vol) })

	mc, rest, grpc := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := append([]string{"run", "-d", "--name", ctr, "--network", "host", "--read-only", "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges", "-v", vol + ":/run/ndbgate",
		"-e", "NDBGATE_MEMCACHE=" + mc, "-e", "NDBGATE_REST=" + rest, "-e", "NDBGATE_GRPC=" + grpc,
		"-e", "NDBGATE_MEMORY_LIMIT=64m"}, opts...)
	mustRun(t, time.Minute, podman, append(args, tag)...)
	t.Cleanup(func() { _, _ = run(t, time.Minute, podman, "rm", "-f", "-v", "-t", "0", ctr) })
	logs := func() string { out, _ := run(t, time.Minute, podman, "logs", ctr); return out }

	client := &http.Client{Timeout: 2 * time.Second}
	waitOK(t, client, "http://"+rest+"/readyz", logs, nil)
	if code := httpStatus(t, client, "GET", "http://"+rest+"/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	memcacheRoundTrip(t, "tcp", mc, "container-tcp", "from-the-host")

	// Its process runs as the image's user.
	pid := strings.TrimSpace(mustRun(t, time.Minute, podman, "inspect", "--format", "{{.State.Pid}}", ctr))
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "Uid:") && strings.Fields(line)[1] != "65532" {
			t.Errorf("the container's ndbgate runs as %s", line)
		}
	}
	metrics, err := client.Get("http://" + rest + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	if !strings.Contains(string(body), "ndbgate_engine_limit_bytes 6.7108864e+07") {
		t.Error("NDBGATE_MEMORY_LIMIT=64m did not reach the engine (ndbgate_engine_limit_bytes)")
	}

	// The app container: another user, ndbgate's group, the same volume.
	appTag := "localhost/ndbgate-deploy-test-app:" + suffix
	ctx := openTempDir(t)
	copyFile(t, sockClientBinary(t), filepath.Join(ctx, "sockclient"), 0o755)
	if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte("FROM scratch\nCOPY sockclient /sockclient\nENTRYPOINT [\"/sockclient\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 2*time.Minute, podman, "build", "-q", "-t", appTag, ctx)
	t.Cleanup(func() { _, _ = run(t, time.Minute, podman, "rmi", "-f", appTag) })
	appArgs := func(extra ...string) []string {
		a := append([]string{"run", "--rm", "--network", "none", "--read-only", "--cap-drop", "ALL", "--user", "10001:10001",
			"-v", vol + ":/run/ndbgate"}, opts...)
		return append(append(a, extra...), appTag, "-unix", socketPath, "-key", "from-the-app", "-value", "app-value")
	}
	if out, err := run(t, time.Minute, podman, appArgs("--group-add", "65532")...); err != nil || !strings.Contains(out, "stored and read back") {
		t.Errorf("the app container (user 10001, group 65532) could not use the socket: %v\n%s\n%s", err, out, logs())
	}
	if out, err := run(t, time.Minute, podman, appArgs()...); err == nil || !strings.Contains(out, "permission denied") {
		t.Errorf("the app container without ndbgate's group: want permission denied, got %v\n%s", err, out)
	}
	// The host reads what the app stored: one server behind both.
	if got := memcacheGet(t, "tcp", mc, "from-the-app"); got != "app-value" {
		t.Errorf("the app's item read over TCP: %q", got)
	}

	// Graceful stop: SIGTERM, exit 0, well within the grace.
	start := time.Now()
	mustRun(t, time.Minute, podman, "stop", "-t", "15", ctr)
	took := time.Since(start)
	if code := strings.TrimSpace(mustRun(t, time.Minute, podman, "inspect", "--format", "{{.State.ExitCode}}", ctr)); code != "0" {
		t.Errorf("exit code after podman stop: %s\n%s", code, logs())
	}
	if took > 10*time.Second {
		t.Errorf("podman stop took %v: SIGTERM did not stop ndbgate promptly", took)
	}
	t.Logf("podman stop took %v", took.Round(time.Millisecond))
	if !strings.Contains(logs(), `"msg":"shutting down"`) {
		t.Errorf("no shutdown in the JSON log:\n%s", logs())
	}
}

// runSized runs the image under the memory limit the Helm chart gives a
// 64 MiB engine, and writes 480 MiB through it (80 MiB at each of six value
// sizes, 1,000 to 120,000 bytes, README's worst case for the arena): the
// container must not be killed for memory, and must evict instead.
func runSized(t *testing.T, podman, tag string) {
	out, err := helmTemplate(t, "sized", "ndbgate:\n  embedded: {memoryLimitMiB: 64}\n")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	objs, err := decodeManifests(out)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := ndbgateContainer(t, &sortObjects(t, objs).deploy.Spec.Template.Spec)
	limit := g.Resources.Limits.Memory()
	engine := envOf(g)["NDBGATE_MEMORY_LIMIT"]
	opts := podmanRunOptions(t, podman, tag)

	ctr := fmt.Sprintf("ndbgate-deploy-sized-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	mc, rest := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := append([]string{"run", "-d", "--name", ctr, "--network", "host", "--read-only", "--cap-drop", "ALL",
		"--memory", fmt.Sprintf("%db", limit.Value()), "--memory-swap", fmt.Sprintf("%db", limit.Value()),
		"-e", "NDBGATE_MEMCACHE=" + mc, "-e", "NDBGATE_REST=" + rest, "-e", "NDBGATE_GRPC=", "-e", "NDBGATE_MEMCACHE_SOCKET=",
		"-e", "NDBGATE_MEMORY_LIMIT=" + engine}, opts...)
	mustRun(t, time.Minute, podman, append(args, tag)...)
	t.Cleanup(func() { _, _ = run(t, time.Minute, podman, "rm", "-f", "-v", "-t", "0", ctr) })
	logs := func() string { out, _ := run(t, time.Minute, podman, "logs", ctr); return out }
	client := &http.Client{Timeout: 5 * time.Second}
	waitOK(t, client, "http://"+rest+"/readyz", logs, nil)

	start := time.Now()
	written := fillMemcache(t, mc)
	took := time.Since(start)
	state := strings.TrimSpace(mustRun(t, time.Minute, podman, "inspect", "--format", "{{.State.Status}} {{.State.OOMKilled}}", ctr))
	if state != "running false" {
		t.Fatalf("after %d MiB of writes the container is %q (status, OOM-killed) under its %s limit\n%s", written>>20, state, limit, logs())
	}
	resp, err := client.Get("http://" + rest + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	fams := parseMetrics(t, resp.Body)
	resp.Body.Close()
	value := func(name string) float64 {
		f := fams[name]
		if f == nil || len(f.Metric) == 0 {
			t.Fatalf("%s not exported", name)
		}
		m := f.Metric[0]
		if m.Gauge != nil {
			return m.GetGauge().GetValue()
		}
		return m.GetCounter().GetValue()
	}
	if value("ndbgate_engine_evictions_total") == 0 {
		t.Error("no evictions: the engine did not hold to its limit")
	}
	if oom := value("ndbgate_engine_out_of_memory_total"); oom != 0 {
		t.Errorf("%v writes refused for memory on a cache container", oom)
	}
	if b, l := value("ndbgate_engine_bytes"), value("ndbgate_engine_limit_bytes"); b > l {
		t.Errorf("engine bytes %v over its limit %v", b, l)
	}
	peak := "not read"
	id := strings.TrimSpace(mustRun(t, time.Minute, podman, "inspect", "--format", "{{.Id}}", ctr))
	for _, pattern := range []string{"/sys/fs/cgroup/memory/*/*" + id + "*/memory.max_usage_in_bytes", "/sys/fs/cgroup/*/*" + id + "*/memory.peak"} {
		if m, _ := filepath.Glob(pattern); len(m) == 1 {
			if b, err := os.ReadFile(m[0]); err == nil {
				var n int64
				fmt.Sscan(string(b), &n)
				peak = fmt.Sprintf("%d MiB", n>>20)
			}
		}
	}
	t.Logf("--memory-limit %s in a %s container: %d MiB written in %v, peak cgroup memory %s, RSS at the end %.0f MiB, %.0f evictions",
		engine, limit, written>>20, took.Round(time.Millisecond), peak, value("process_resident_memory_bytes")/(1<<20), value("ndbgate_engine_evictions_total"))
}

// fillMemcache writes 80 MiB at each of six value sizes, pipelined with
// noreply, and waits until the server has read it all.
func fillMemcache(t *testing.T, addr string) int64 {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	w := bufio.NewWriterSize(c, 1<<20)
	var total int64
	for _, size := range []int{1000, 5000, 20000, 50000, 100000, 120000} {
		value := bytes.Repeat([]byte{'x'}, size)
		for i := range (80 << 20) / size {
			fmt.Fprintf(w, "set k%d_%d 0 0 %d noreply\r\n", size, i, size)
			w.Write(value)
			w.WriteString("\r\n")
			total += int64(size)
		}
	}
	w.WriteString("version\r\n")
	if err := w.Flush(); err != nil {
		t.Fatalf("writing: %v", err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "VERSION ") {
		t.Fatalf("after the writes: %q %v", line, err)
	}
	return total
}
