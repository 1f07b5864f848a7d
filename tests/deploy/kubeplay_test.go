package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestPodmanKubePlay runs the chart's Deployment with `podman kube play`:
// the default image and an app image, both containers of the rendered Pod
// as podman reads them (the shared emptyDir for the socket, non-root users,
// read-only root filesystems, no capabilities, the memory limit), and the
// probes run as the kubelet runs them, against the Pod's IP.
//
// What podman (4.3, Debian's) does not do, and what runs instead:
//   - Native sidecars: podman runs init containers to completion before the
//     app, so ndbgate as an init container with restartPolicy Always would
//     hold the Pod in its init phase. The chart's other rendering runs:
//     ndbgate.nativeSidecar=false, ndbgate an ordinary container.
//   - The order native sidecars give (ndbgate started, its startup probe
//     passed, then the app): podman starts a Pod's containers together. The
//     test plays the Pod created but not started (--start=false), starts
//     ndbgate, runs its startup probe, then starts the app, as the kubelet
//     does for a native sidecar.
//   - fsGroup: podman ignores it. The chart also lists ndbgate's group in
//     supplementalGroups (which the kubelet adds anyway), and podman gives
//     it to the app from there.
//   - Probes: podman turns a liveness probe into a healthcheck that runs
//     curl in a shell inside the container (a FROM scratch image has
//     neither) on the probe's port, which it does not resolve when named
//     ("http"), and runs it from systemd timers. The test probes instead.
//   - preStop hooks are not run by podman.
func TestPodmanKubePlay(t *testing.T) {
	podman := podmanBin(t)
	suffix := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	tag := "kube-play-" + suffix
	image := "localhost/ndbgate:" + tag
	start := time.Now()
	cmd := exec.Command(filepath.Join(repoRoot, "deploy/image/build.sh"), image)
	cmd.Env = append(os.Environ(), "IMAGE_TOOL="+podman, "VERSION=deploy-test")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy/image/build.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = run(t, time.Minute, podman, "rmi", "-f", image) })
	appImage := "localhost/ndbgate-deploy-test-app:" + suffix
	ctx := openTempDir(t)
	copyFile(t, sockClientBinary(t), filepath.Join(ctx, "sockclient"), 0o755)
	if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte("FROM scratch\nCOPY sockclient /sockclient\nENTRYPOINT [\"/sockclient\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 2*time.Minute, podman, "build", "-q", "-t", appImage, ctx)
	t.Cleanup(func() { _, _ = run(t, time.Minute, podman, "rmi", "-f", appImage) })
	t.Logf("images built in %v", time.Since(start).Round(100*time.Millisecond))

	// The chart, plain-container rendering, the images above, REST on a
	// free port (podman publishes a container port on the host's same port).
	rest := freePort(t)
	values := fmt.Sprintf(`replicaCount: 1
app:
  image: %q
  args: ["-unix", "/run/ndbgate/memcache.sock", "-every", "500ms", "-key", "kube-play", "-value", "from-the-pod"]
ndbgate:
  nativeSidecar: false
  image: {repository: localhost/ndbgate, tag: %q}
  embedded: {memoryLimitMiB: 64}
  rest: "0.0.0.0:%d"
`, appImage, tag, rest)
	out, err := helmTemplate(t, "kp", values)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	objs, err := decodeManifests(out)
	if err != nil {
		t.Fatal(err)
	}
	r := sortObjects(t, objs)
	spec := &r.deploy.Spec.Template.Spec
	g, native := ndbgateContainer(t, spec)
	if native {
		t.Fatal("nativeSidecar=false rendered ndbgate as an init container")
	}
	app := appContainer(t, spec)
	// podman reads the Deployment alone (its Service and PDB mean nothing
	// to it): the rendered document, as helm wrote it.
	var deployDoc string
	for _, doc := range strings.Split(out, "\n---") {
		if strings.Contains(doc, "\nkind: Deployment\n") {
			deployDoc = doc
		}
	}
	if deployDoc == "" {
		t.Fatal("no Deployment in the rendering")
	}
	dir := t.TempDir()
	manifest := filepath.Join(dir, "pod.yaml")
	if err := os.WriteFile(manifest, []byte(deployDoc), 0o644); err != nil {
		t.Fatal(err)
	}

	// Podman's configuration for this machine: runc, and rlimits within the
	// hard ones (see podmanRunOptions; kube play takes no --ulimit). Podman
	// 4.3 has no CONTAINERS_CONF_OVERRIDE: CONTAINERS_CONF replaces the
	// packaged containers.conf, whose settings are podman's built-in
	// defaults but for default_capabilities, which the Pod's containers
	// drop (ALL) anyway.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("[containers]\ndefault_ulimits = [\"nofile=%d:%d\", \"nproc=4096:4096\"]\n", lim.Max, lim.Max)
	if _, err := exec.LookPath("runc"); err == nil {
		conf += "[engine]\nruntime = \"runc\"\n"
	}
	confFile := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	pm := func(timeout time.Duration, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		c := exec.CommandContext(ctx, podman, args...)
		c.Env = append(os.Environ(), "CONTAINERS_CONF="+confFile)
		b, err := c.CombinedOutput()
		return string(b), err
	}
	mustPM := func(args ...string) string {
		t.Helper()
		out, err := pm(2*time.Minute, args...)
		if err != nil {
			t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	// The emptyDir becomes a podman volume named after it: one left by an
	// interrupted run would be reused.
	for _, v := range spec.Volumes {
		_, _ = pm(time.Minute, "volume", "rm", v.Name)
	}
	out = mustPM("kube", "play", "--start=false", manifest)
	t.Cleanup(func() {
		if out, err := pm(2*time.Minute, "kube", "down", manifest); err != nil {
			t.Logf("podman kube down: %v\n%s", err, out)
		}
		for _, v := range spec.Volumes {
			_, _ = pm(time.Minute, "volume", "rm", "-f", v.Name)
		}
	})
	// podman prints "Pod:" and the new Pod's ID (it names the Pod after the
	// Deployment: <name>-pod-0 in podman 4.3), then its containers.
	podID := ""
	if _, after, ok := strings.Cut(out, "Pod:"); ok {
		if f := strings.Fields(after); len(f) > 0 {
			podID = f[0]
		}
	}
	if podID == "" {
		t.Fatalf("podman kube play printed no Pod:\n%s", out)
	}
	podName := strings.TrimSpace(mustPM("pod", "inspect", "--format", "{{.Name}}", podID))
	if !strings.HasPrefix(podName, r.deploy.Name) {
		t.Errorf("pod %s is not named after the Deployment %s", podName, r.deploy.Name)
	}
	names := strings.Fields(mustPM("ps", "-a", "--filter", "pod="+podID, "--format", "{{.Names}}"))
	ctrName := func(c *corev1.Container) string {
		for _, n := range names {
			if n == podName+"-"+c.Name {
				return n
			}
		}
		t.Fatalf("podman made no container for %s in pod %s (it has %v)\n%s", c.Name, podName, names, out)
		return ""
	}
	gName, appName := ctrName(g), ctrName(app)
	logs := func(name string) string { o, _ := pm(time.Minute, "logs", name); return o }

	// ndbgate first; its startup probe; then the app.
	mustPM("start", gName)
	var infra []struct {
		NetworkSettings struct {
			Networks map[string]struct{ IPAddress string }
		}
	}
	infraID := strings.TrimSpace(mustPM("pod", "inspect", "--format", "{{.InfraContainerID}}", podID))
	if err := json.Unmarshal([]byte(mustPM("inspect", infraID)), &infra); err != nil || len(infra) != 1 {
		t.Fatalf("podman inspect %s: %v", infraID, err)
	}
	podIP := ""
	for _, n := range infra[0].NetworkSettings.Networks {
		podIP = n.IPAddress
	}
	if podIP == "" {
		t.Fatalf("the Pod has no IP: %+v", infra)
	}
	t.Logf("pod %s: IP %s, containers %s, %s", podName, podIP, gName, appName)
	kubeletProbe := func(p *corev1.Probe) error { return probeAt(podIP, g, p) }
	startupBy := time.Now().Add(time.Duration(g.StartupProbe.PeriodSeconds*g.StartupProbe.FailureThreshold) * time.Second)
	for {
		err := kubeletProbe(g.StartupProbe)
		if err == nil {
			break
		}
		if time.Now().After(startupBy) {
			t.Fatalf("startup probe: %v\n%s", err, logs(gName))
		}
		time.Sleep(time.Duration(g.StartupProbe.PeriodSeconds) * time.Second)
	}
	mustPM("start", appName)

	// The app uses the socket: its log reports round trips, and ndbgate
	// serves what it stored.
	sock := ""
	for _, e := range app.Env {
		if e.Name == "MEMCACHE_SOCKET" {
			sock = e.Value
		}
	}
	if sock == "" || !slices.Contains(app.Args, sock) {
		t.Fatalf("the app is not pointed at the socket $MEMCACHE_SOCKET (%q): args %q", sock, app.Args)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs(appName), fmt.Sprintf(`unix %s: stored and read back "from-the-pod"`, sock)) {
		if time.Now().After(deadline) {
			t.Fatalf("the app never completed a round trip over the socket:\n%s\nndbgate:\n%s", logs(appName), logs(gName))
		}
		time.Sleep(250 * time.Millisecond)
	}
	if strings.Contains(logs(appName), "permission denied") {
		t.Errorf("the app was refused the socket:\n%s", logs(appName))
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(fmt.Sprintf("http://%s:%d/v1/kv/default/kube-play", podIP, rest))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "from-the-pod" {
		t.Errorf("REST read of the app's item: %s %q", resp.Status, body)
	}

	// Readiness and liveness, as the kubelet runs them, a few times.
	for i := range 3 {
		for what, p := range map[string]*corev1.Probe{"startup": g.StartupProbe, "readiness": g.ReadinessProbe, "liveness": g.LivenessProbe} {
			if err := kubeletProbe(p); err != nil {
				t.Errorf("%s probe (trial %d): %v", what, i+1, err)
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("startup, readiness and liveness probes pass against %s", podIP)

	// What podman made of the containers' security context, volumes and
	// limits.
	type inspected struct {
		State struct {
			Pid     int
			Running bool
		}
		Config struct {
			User string
		}
		HostConfig struct {
			ReadonlyRootfs bool
			GroupAdd       []string
			Memory         int64
			CapAdd         []string
		}
		EffectiveCaps []string
		Mounts        []struct {
			Type, Name, Destination string
		}
	}
	inspect := func(name string) inspected {
		var v []inspected
		if err := json.Unmarshal([]byte(mustPM("inspect", name)), &v); err != nil || len(v) != 1 {
			t.Fatalf("podman inspect %s: %v", name, err)
		}
		return v[0]
	}
	gi, ai := inspect(gName), inspect(appName)
	for name, c := range map[string]struct {
		i   inspected
		ctr *corev1.Container
	}{gName: {gi, g}, appName: {ai, app}} {
		if !c.i.State.Running {
			t.Errorf("%s is not running:\n%s", name, logs(name))
		}
		if !c.i.HostConfig.ReadonlyRootfs {
			t.Errorf("%s: root filesystem writable", name)
		}
		if len(c.i.EffectiveCaps) != 0 {
			t.Errorf("%s: capabilities %v", name, c.i.EffectiveCaps)
		}
		uid := strconv.FormatInt(*c.ctr.SecurityContext.RunAsUser, 10)
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.i.State.Pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" && f[1] != uid {
				t.Errorf("%s runs as %s, want uid %s", name, line, uid)
			}
		}
		var socketVol string
		for _, m := range c.i.Mounts {
			if m.Destination == "/run/ndbgate" {
				socketVol = m.Type + ":" + m.Name
			}
		}
		if socketVol == "" {
			t.Errorf("%s: nothing mounted at /run/ndbgate: %+v", name, c.i.Mounts)
		}
	}
	if !slices.Contains(ai.HostConfig.GroupAdd, strconv.FormatInt(*spec.SecurityContext.FSGroup, 10)) {
		t.Errorf("the app's groups %v lack ndbgate's %d", ai.HostConfig.GroupAdd, *spec.SecurityContext.FSGroup)
	}
	if want := g.Resources.Limits.Memory().Value(); gi.HostConfig.Memory != want {
		t.Errorf("ndbgate's memory limit under podman: %d, the chart's %d", gi.HostConfig.Memory, want)
	}
	t.Logf("ndbgate: user %s, read-only root, no capabilities, memory limit %d MiB; app: user %s, groups %v",
		gi.Config.User, gi.HostConfig.Memory>>20, ai.Config.User, ai.HostConfig.GroupAdd)
}

// probeAt runs a probe of container c as the kubelet does, against host:
// an HTTP GET on the (named) port answering 2xx or 3xx, or a TCP connect.
func probeAt(host string, c *corev1.Container, p *corev1.Probe) error {
	port, ok := probePort(p)
	if !ok {
		return fmt.Errorf("probe of a kind the test does not model: %+v", p)
	}
	n := port.IntVal
	if port.Type == intstr.String {
		n = containerPort(c, port.StrVal)
	}
	if p.HTTPGet == nil {
		return fmt.Errorf("not an HTTP probe: %+v", p)
	}
	url := fmt.Sprintf("%s://%s:%d%s", strings.ToLower(string(p.HTTPGet.Scheme)), host, n, p.HTTPGet.Path)
	resp, err := (&http.Client{Timeout: time.Duration(p.TimeoutSeconds) * time.Second}).Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
