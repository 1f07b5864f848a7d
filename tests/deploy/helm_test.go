package deploy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

const (
	chartDir = "deploy/helm/ndbgate-sidecar"
	// exampleFile is the chart rendered with its defaults, as a plain
	// manifest for users without helm.
	exampleFile    = "deploy/kubernetes/sidecar.yaml"
	exampleRelease = "myapp"
	// kubeVersion is what helm renders for: native sidecars need 1.29, the
	// preStop sleep 1.30 (Chart.yaml's kubeVersion).
	kubeVersion = "1.33.0"
)

// decoder decodes the rendered objects strictly: an unknown or duplicated
// field is an error, as kubectl's strict field validation makes it. The
// PrometheusRule decodes into prometheus-operator's Go type.
var decoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, monitoringv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}()

// decodeManifests splits a multi-document YAML stream and decodes every
// document strictly into its k8s.io/api type.
func decodeManifests(manifest string) ([]runtime.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	var objs []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decoding %v: %w\n%s", gvk, err, doc)
		}
		objs = append(objs, obj)
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}

// TestStrictDecoderRejectsMisspelledFields shows that the decoder the chart
// tests rely on fails on a misspelled field and on an unknown kind.
func TestStrictDecoderRejectsMisspelledFields(t *testing.T) {
	good := `apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: c
      image: i
      readinessProbe: {httpGet: {path: /readyz, port: 4406}}
`
	if _, err := decodeManifests(good); err != nil {
		t.Fatalf("a valid Pod: %v", err)
	}
	for name, bad := range map[string]string{
		"misspelled field":         strings.Replace(good, "readinessProbe", "readinesProbe", 1),
		"field at the wrong level": strings.Replace(good, "      image: i\n", "      image: i\n      fsGroup: 1\n", 1),
		"duplicated field":         strings.Replace(good, "      image: i\n", "      image: i\n      image: j\n", 1),
		"unknown kind":             strings.Replace(good, "kind: Pod", "kind: Pood", 1),
	} {
		if _, err := decodeManifests(bad); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// helmTemplate renders the chart with the given values files (YAML text).
func helmTemplate(t *testing.T, release string, values ...string) (string, error) {
	t.Helper()
	args := []string{"template", release, chartDir, "--kube-version", kubeVersion}
	for i, v := range values {
		f := filepath.Join(t.TempDir(), fmt.Sprintf("values%d.yaml", i))
		if err := os.WriteFile(f, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--values", f)
	}
	out, err := run(t, 2*time.Minute, helmBin(t), args...)
	return out, err
}

// chartCase is one configuration of the chart that the tests render, lint,
// decode, check and run.
type chartCase struct {
	name   string
	values string
	// ndb: the ndbgate container points at an NDB cluster.
	ndb bool
	// apiKeys, tls, mutual: the Secrets the case mounts.
	apiKeys, tls, mutual bool
	// configMap: the case renders an ndbgate configuration file.
	configMap bool
	// plain: ndbgate is an ordinary container, not a native sidecar.
	plain bool
}

var chartCases = []chartCase{
	{name: "defaults"},
	{name: "plain-container-keys-tls", plain: true, apiKeys: true, tls: true, values: `
ndbgate:
  nativeSidecar: false
  apiKeys: {secretName: ndbgate-keys}
  tls: {secretName: ndbgate-tls}
  memcache: {tls: "127.0.0.1:${PORT_MCTLS}"}
`},
	{name: "mutual-tls", tls: true, mutual: true, values: `
ndbgate:
  tls: {secretName: ndbgate-tls, mutual: true}
`},
	{name: "embedded-extra-config", configMap: true, values: `
ndbgate:
  embedded: {memoryLimitMiB: 64, partitions: 8}
  config:
    limits: {item_size_max: 2m}
    containers:
      - {name: hot, database: app, table: hot, key_columns: [k], value_columns: [v], eviction: true}
    key_prefixes:
      - {prefix: "hot:", container: hot, policy: local-only}
      - {prefix: "", container: default, policy: ndb-only}
`},
	{name: "ndb-only", ndb: true, values: `
ndbgate:
  mode: ndb
  ndb: {connectstring: "mgmd-0.mgmd:1186,mgmd-1.mgmd:1186", poolSize: 4}
`},
	{name: "ndb-caching", ndb: true, configMap: true, apiKeys: true, values: `
ndbgate:
  mode: ndb
  ndb:
    connectstring: "mgmd:1186"
    cache: {enabled: true, memoryLimitMiB: 96}
  apiKeys: {secretName: ndbgate-keys, secretKey: keys.yaml}
`},
}

// portValues moves the listeners to loopback ports of this machine for the
// runs; ${PORT_MCTLS} in a case's values is the memcache TLS port.
func portValues(t *testing.T) (string, map[string]int) {
	p := map[string]int{"memcache": freePort(t), "rest": freePort(t), "grpc": freePort(t), "mctls": freePort(t)}
	return fmt.Sprintf(`
ndbgate:
  memcache: {tcp: "127.0.0.1:%d"}
  rest: "127.0.0.1:%d"
  grpc: "127.0.0.1:%d"
`, p["memcache"], p["rest"], p["grpc"]), p
}

func TestHelmLint(t *testing.T) {
	helm := helmBin(t)
	for _, c := range chartCases {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(f, []byte(strings.ReplaceAll(c.values, "${PORT_MCTLS}", "11212")), 0o644); err != nil {
				t.Fatal(err)
			}
			out := mustRun(t, 2*time.Minute, helm, "lint", "--strict", "--kube-version", kubeVersion, chartDir, "--values", f)
			if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
}

// TestHelmRefusesBadValues: the values schema and the chart's own checks
// refuse what would deploy a broken Pod.
func TestHelmRefusesBadValues(t *testing.T) {
	for name, c := range map[string]struct{ values, want string }{
		"misspelled key":             {"ndbgate:\n  memcache: {tpc: 127.0.0.1:11211}\n", "additional properties 'tpc' not allowed"},
		"unknown mode":               {"ndbgate:\n  mode: cluster\n", "at '/ndbgate/mode'"},
		"ndb without connectstring":  {"ndbgate:\n  mode: ndb\n", "needs ndbgate.ndb.connectstring"},
		"connectstring on embedded":  {"ndbgate:\n  ndb: {connectstring: 'm:1186'}\n", "ndbgate.mode is embedded"},
		"mutual TLS without secret":  {"ndbgate:\n  tls: {mutual: true}\n", "needs ndbgate.tls.secretName"},
		"unbounded embedded engine":  {"ndbgate:\n  embedded: {memoryLimitMiB: 0}\n", "at '/ndbgate/embedded/memoryLimitMiB'"},
		"bad listener":               {"ndbgate:\n  rest: localhost\n", "at '/ndbgate/rest'"},
		"app named like the sidecar": {"app: {name: ndbgate}\n", "at '/app/name'"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := helmTemplate(t, "bad", c.values)
			if err == nil {
				t.Fatalf("helm template accepted %q", c.values)
			}
			if !strings.Contains(out, c.want) {
				t.Fatalf("helm template refused %q, but without %q:\n%s", c.values, c.want, out)
			}
		})
	}
}

// TestKubernetesExample: deploy/kubernetes/sidecar.yaml is the chart
// rendered with its defaults (UPDATE=1 rewrites it), and decodes strictly.
func TestKubernetesExample(t *testing.T) {
	out, err := helmTemplate(t, exampleRelease)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	want := exampleHeader + out
	path := filepath.Join(repoRoot, exampleFile)
	if os.Getenv("UPDATE") == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is not the chart's rendering with its defaults; run `UPDATE=1 go test -run TestKubernetesExample` in tests/deploy", exampleFile)
	}
	objs, err := decodeManifests(string(got))
	if err != nil {
		t.Fatal(err)
	}
	checkObjects(t, objs, chartCase{name: "defaults"})
}

const exampleHeader = `# An application and ndbgate in one Pod: the chart deploy/helm/ndbgate-sidecar
# rendered with its defaults (embedded engine, 256 MiB, native sidecar):
#
#   helm template myapp deploy/helm/ndbgate-sidecar --kube-version 1.33.0
#
# Replace the app's image, then: kubectl apply -f deploy/kubernetes/sidecar.yaml
# The app reaches memcache on the unix socket /run/ndbgate/memcache.sock (an
# emptyDir both containers mount) or on 127.0.0.1:11211. Guide: deploy/README.md.
# Generated: tests/deploy checks that it matches the chart (UPDATE=1 rewrites it).
`

// TestHelmChart renders every case, decodes each object strictly into the
// k8s.io/api types, checks the Pod's wiring, and runs the ndbgate container
// as the kubelet would: its args and env with the real binary, its volumes
// as directories, its probes against it, and the app's view of the socket.
func TestHelmChart(t *testing.T) {
	requireBinary(t)
	for _, c := range chartCases {
		t.Run(c.name, func(t *testing.T) {
			ports, p := portValues(t)
			values := strings.ReplaceAll(c.values, "${PORT_MCTLS}", fmt.Sprint(p["mctls"]))
			out, err := helmTemplate(t, "t", values, ports)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			objs, err := decodeManifests(out)
			if err != nil {
				t.Fatal(err)
			}
			checkObjects(t, objs, c)
			runPod(t, objs, c)
		})
	}
}

// rendered holds the objects of one rendering by kind.
type rendered struct {
	deploy     *appsv1.Deployment
	configMaps map[string]*corev1.ConfigMap
	services   []*corev1.Service
	pdbs       []*policyv1.PodDisruptionBudget
}

func sortObjects(t *testing.T, objs []runtime.Object) rendered {
	t.Helper()
	r := rendered{configMaps: map[string]*corev1.ConfigMap{}}
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			if r.deploy != nil {
				t.Fatal("two Deployments rendered")
			}
			r.deploy = o
		case *corev1.ConfigMap:
			r.configMaps[o.Name] = o
		case *corev1.Service:
			r.services = append(r.services, o)
		case *policyv1.PodDisruptionBudget:
			r.pdbs = append(r.pdbs, o)
		default:
			t.Fatalf("unexpected object %T", o)
		}
	}
	if r.deploy == nil {
		t.Fatal("no Deployment rendered")
	}
	return r
}

// ndbgateContainer returns the ndbgate container and whether it is a native
// sidecar (an init container that keeps running).
func ndbgateContainer(t *testing.T, spec *corev1.PodSpec) (*corev1.Container, bool) {
	t.Helper()
	for i := range spec.InitContainers {
		if c := &spec.InitContainers[i]; c.Name == "ndbgate" {
			return c, true
		}
	}
	for i := range spec.Containers {
		if c := &spec.Containers[i]; c.Name == "ndbgate" {
			return c, false
		}
	}
	t.Fatal("no ndbgate container")
	return nil, false
}

func appContainer(t *testing.T, spec *corev1.PodSpec) *corev1.Container {
	t.Helper()
	for i := range spec.Containers {
		if spec.Containers[i].Name != "ndbgate" {
			return &spec.Containers[i]
		}
	}
	t.Fatal("no app container")
	return nil
}

func envOf(c *corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

// checkObjects checks what the API server's schema does not: that the
// objects refer to each other correctly and that the sidecar is locked down.
func checkObjects(t *testing.T, objs []runtime.Object, c chartCase) {
	t.Helper()
	r := sortObjects(t, objs)
	d := r.deploy
	spec := &d.Spec.Template.Spec
	sel, err := metav1LabelSelector(d)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the Deployment's selector %v does not match its Pod labels %v", sel, d.Spec.Template.Labels)
	}
	for _, s := range r.services {
		if !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Service %s selects no Pod of the Deployment", s.Name)
		}
	}
	for _, p := range r.pdbs {
		if p.Spec.Selector == nil || !labelsMatch(p.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			t.Errorf("PodDisruptionBudget %s selects no Pod of the Deployment", p.Name)
		}
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("rolling update %+v: want maxUnavailable 0", d.Spec.Strategy)
	}

	g, native := ndbgateContainer(t, spec)
	app := appContainer(t, spec)
	if native == c.plain {
		t.Errorf("ndbgate native sidecar = %v", native)
	}
	if native && (g.RestartPolicy == nil || *g.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
		t.Error("ndbgate is an init container without restartPolicy Always: the Pod would wait for it to exit")
	}
	if !native && (g.Lifecycle == nil || g.Lifecycle.PreStop == nil || g.Lifecycle.PreStop.Sleep == nil) {
		t.Error("ndbgate as a plain container has no preStop sleep to outlive the app's drain")
	}

	// Names: unique containers, every mount a volume, every named probe
	// port a port of its container, the Service's target a port of the app.
	volumes := map[string]*corev1.Volume{}
	for i := range spec.Volumes {
		volumes[spec.Volumes[i].Name] = &spec.Volumes[i]
	}
	seen := map[string]bool{}
	for _, ctr := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		if seen[ctr.Name] {
			t.Errorf("two containers named %s", ctr.Name)
		}
		seen[ctr.Name] = true
		for _, m := range ctr.VolumeMounts {
			if volumes[m.Name] == nil {
				t.Errorf("container %s mounts volume %s, which the Pod does not have", ctr.Name, m.Name)
			}
		}
		for _, p := range []*corev1.Probe{ctr.StartupProbe, ctr.ReadinessProbe, ctr.LivenessProbe} {
			if p == nil {
				continue
			}
			if port, ok := probePort(p); ok && port.StrVal != "" && containerPort(&ctr, port.StrVal) == 0 {
				t.Errorf("container %s probes port %q, which it does not declare", ctr.Name, port.StrVal)
			}
		}
	}
	for _, s := range r.services {
		for _, p := range s.Spec.Ports {
			if p.TargetPort.StrVal != "" && containerPort(app, p.TargetPort.StrVal) == 0 {
				t.Errorf("Service %s targets port %q, which the app does not declare", s.Name, p.TargetPort.StrVal)
			}
		}
	}
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil && r.configMaps[v.ConfigMap.Name] == nil {
			t.Errorf("volume %s refers to ConfigMap %s, which is not rendered", v.Name, v.ConfigMap.Name)
		}
	}
	if got := len(r.configMaps) > 0; got != c.configMap {
		t.Errorf("ConfigMap rendered = %v, want %v", got, c.configMap)
	}

	// Every NDBGATE_* variable is one ndbgate reads: it ignores others.
	known := ndbgateEnvNames(t)
	for _, e := range g.Env {
		if strings.HasPrefix(e.Name, "NDBGATE_") && !known[e.Name] {
			t.Errorf("env %s: ndbgate reads no such variable (it would be ignored)", e.Name)
		}
	}

	// The socket: one emptyDir, mounted by both at the socket's directory.
	env, appEnv := envOf(g), envOf(app)
	sock := env["NDBGATE_MEMCACHE_SOCKET"]
	if sock == "" || appEnv["MEMCACHE_SOCKET"] != sock {
		t.Errorf("socket: ndbgate serves %q, the app is told %q", sock, appEnv["MEMCACHE_SOCKET"])
	}
	gm, am := mountOf(g, filepath.Dir(sock)), mountOf(app, filepath.Dir(sock))
	if gm == nil || am == nil || gm.Name != am.Name {
		t.Errorf("the socket's directory %s is not one volume mounted by both containers", filepath.Dir(sock))
	} else if v := volumes[gm.Name]; v.EmptyDir == nil {
		t.Errorf("the socket's volume %s is not an emptyDir", gm.Name)
	}
	if !containsArg(g.Args, "--memcache-socket-mode=0770") {
		t.Error("the socket is not group-shared (--memcache-socket-mode=0770): the app, another user, could not connect")
	}

	// Locked down: non-root, read-only root, no privilege escalation, no
	// capabilities, a seccomp profile; the Pod's fsGroup is ndbgate's group,
	// so that the app shares the socket through it.
	psc := spec.SecurityContext
	if psc == nil || psc.FSGroup == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil {
		t.Fatalf("Pod securityContext: %+v", psc)
	}
	for _, ctr := range []*corev1.Container{g, app} {
		sc := ctr.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("%s: no securityContext", ctr.Name)
		case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0:
			t.Errorf("%s: not non-root: %+v", ctr.Name, sc)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("%s: root filesystem writable", ctr.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("%s: privilege escalation allowed", ctr.Name)
		case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
			t.Errorf("%s: capabilities not dropped", ctr.Name)
		}
	}
	if !slices.Contains(psc.SupplementalGroups, *psc.FSGroup) {
		t.Errorf("the Pod's supplementalGroups %v lack its fsGroup %d, which podman kube play (ignoring fsGroup) needs for the app", psc.SupplementalGroups, *psc.FSGroup)
	}
	if sc := g.SecurityContext; sc != nil && (sc.RunAsGroup == nil || *sc.RunAsGroup != *psc.FSGroup) {
		t.Errorf("ndbgate's group is not the Pod's fsGroup %d: the socket's group would not be the app's", *psc.FSGroup)
	}

	// Probes and resources.
	if g.StartupProbe == nil || g.ReadinessProbe == nil || g.LivenessProbe == nil {
		t.Error("ndbgate lacks a startup, readiness or liveness probe")
	}
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := g.Resources.Requests[res]; !ok {
			t.Errorf("ndbgate has no %s request", res)
		}
		if _, ok := g.Resources.Limits[res]; !ok {
			t.Errorf("ndbgate has no %s limit", res)
		}
	}
	if limit, ok := env["NDBGATE_MEMORY_LIMIT"]; ok {
		// The container must hold the engine's pages, slot arrays and
		// indexes (1.5 x the limit, README) and the process besides.
		var mib int64
		if _, err := fmt.Sscanf(limit, "%dm", &mib); err != nil {
			t.Fatalf("NDBGATE_MEMORY_LIMIT %q: %v", limit, err)
		}
		mem := g.Resources.Limits[corev1.ResourceMemory]
		if need := mib<<20*3/2 + 32<<20; mem.Value() < need {
			t.Errorf("memory limit %s is below 1.5 x --memory-limit %s plus 32 MiB", mem.String(), limit)
		}
	} else if !c.ndb || c.configMap {
		t.Error("no NDBGATE_MEMORY_LIMIT: the engine (or the cache in front of NDB) is unbounded")
	}
	if c.ndb != (env["NDBGATE_NDB_CONNECTSTRING"] != "") {
		t.Errorf("NDBGATE_NDB_CONNECTSTRING = %q in case %s", env["NDBGATE_NDB_CONNECTSTRING"], c.name)
	}
	wantImage := "localhost/ndbgate:"
	if c.ndb {
		wantImage = "localhost/ndbgate-ndb:"
	}
	if !strings.HasPrefix(g.Image, wantImage) {
		t.Errorf("ndbgate image %q, want %s...", g.Image, wantImage)
	}
	if c.apiKeys != (env["NDBGATE_API_KEYS"] != "") {
		t.Errorf("NDBGATE_API_KEYS = %q", env["NDBGATE_API_KEYS"])
	}
	if c.tls != containsArg(g.Args, "--api-tls") {
		t.Errorf("--api-tls in args = %v, want %v", !c.tls, c.tls)
	}
	if ann := d.Spec.Template.Annotations; ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/path"] != "/metrics" ||
		fmt.Sprint(containerPort(g, "http")) != ann["prometheus.io/port"] {
		t.Errorf("scrape annotations %v do not point at ndbgate's /metrics", ann)
	}
}

func metav1LabelSelector(d *appsv1.Deployment) (labels.Selector, error) {
	if d.Spec.Selector == nil {
		return nil, errors.New("the Deployment has no selector")
	}
	return labels.SelectorFromSet(d.Spec.Selector.MatchLabels), nil
}

func labelsMatch(sel, lbls map[string]string) bool {
	return len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(lbls))
}

func probePort(p *corev1.Probe) (portRef intstr.IntOrString, ok bool) {
	switch {
	case p.HTTPGet != nil:
		return p.HTTPGet.Port, true
	case p.TCPSocket != nil:
		return p.TCPSocket.Port, true
	}
	return intstr.IntOrString{}, false
}

func containerPort(c *corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func mountOf(c *corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if filepath.Clean(c.VolumeMounts[i].MountPath) == filepath.Clean(path) {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}

// pod is a rendered Pod run on this machine: each volume a directory, the
// ndbgate container the real binary with the container's args and env.
type pod struct {
	spec    *corev1.PodSpec
	g, app  *corev1.Container
	volDirs map[string]string // volume name -> directory
	secrets *testSecrets
	// base holds the volumes and binaries, open to the Pod's users.
	base string
}

// hostPath is where path, as container c sees it, is on this machine.
func (p *pod) hostPath(t *testing.T, c *corev1.Container, path string) string {
	t.Helper()
	best := ""
	var dir string
	for _, m := range c.VolumeMounts {
		mp := filepath.Clean(m.MountPath)
		if (path == mp || strings.HasPrefix(path, mp+"/")) && len(mp) > len(best) {
			best, dir = mp, p.volDirs[m.Name]
		}
	}
	if best == "" {
		t.Fatalf("container %s: %s is on no volume (the root filesystem is read-only)", c.Name, path)
	}
	return dir + strings.TrimPrefix(path, best)
}

// rewrite maps every absolute path in s that lies on one of c's volumes.
func (p *pod) rewrite(t *testing.T, c *corev1.Container, s string) string {
	t.Helper()
	mounts := append([]corev1.VolumeMount(nil), c.VolumeMounts...)
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i].MountPath) > len(mounts[j].MountPath) })
	for _, m := range mounts {
		mp := filepath.Clean(m.MountPath)
		if i := strings.Index(s, mp); i >= 0 && (i == 0 || s[i-1] == '=') {
			return s[:i] + p.volDirs[m.Name] + s[i+len(mp):]
		}
	}
	return s
}

// runPod runs the case's ndbgate container and probes it.
func runPod(t *testing.T, objs []runtime.Object, c chartCase) {
	r := sortObjects(t, objs)
	spec := &r.deploy.Spec.Template.Spec
	g, _ := ndbgateContainer(t, spec)
	p := &pod{spec: spec, g: g, app: appContainer(t, spec), volDirs: map[string]string{}, secrets: newTestSecrets(t), base: openTempDir(t)}
	asRoot := os.Geteuid() == 0
	fsGroup := int(*spec.SecurityContext.FSGroup)
	for _, v := range spec.Volumes {
		dir := filepath.Join(p.base, "volumes", v.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p.volDirs[v.Name] = dir
		switch {
		case v.EmptyDir != nil:
			// The kubelet gives an emptyDir to the fsGroup, setgid.
			if asRoot {
				chownMode(t, dir, 0, fsGroup, 0o2770)
			}
		case v.ConfigMap != nil:
			for name, data := range r.configMaps[v.ConfigMap.Name].Data {
				writeFile(t, filepath.Join(dir, name), []byte(data), 0, fsGroup, 0o644, asRoot)
			}
		case v.Secret != nil:
			data := p.secrets.get(t, v.Secret.SecretName)
			mode := int32(0o644)
			if v.Secret.DefaultMode != nil {
				mode = *v.Secret.DefaultMode
			}
			if len(v.Secret.Items) > 0 {
				for _, it := range v.Secret.Items {
					b, ok := data[it.Key]
					if !ok {
						t.Fatalf("Secret %s has no key %s", v.Secret.SecretName, it.Key)
					}
					writeFile(t, filepath.Join(dir, it.Path), b, 0, fsGroup, os.FileMode(mode), asRoot)
				}
			} else {
				for k, b := range data {
					writeFile(t, filepath.Join(dir, k), b, 0, fsGroup, os.FileMode(mode), asRoot)
				}
			}
		default:
			t.Fatalf("volume %s of a kind the test does not model", v.Name)
		}
	}

	if len(g.Command) != 0 || len(g.Args) == 0 || g.Args[0] != "serve" {
		t.Fatalf("ndbgate container: command %q args %q; want the image's entrypoint with serve", g.Command, g.Args)
	}
	var env, args []string
	for _, e := range g.Env {
		if e.ValueFrom != nil {
			t.Fatalf("env %s from a reference: not modelled", e.Name)
		}
		env = append(env, e.Name+"="+p.rewrite(t, g, e.Value))
	}
	for _, a := range g.Args {
		args = append(args, p.rewrite(t, g, a))
	}
	srv := startServerAs(t, p, env, asRoot, g, args...)

	if c.ndb {
		// This binary has no NDB driver (CGO off, as the default image):
		// it refuses to start only after the whole configuration (env,
		// ConfigMap) was accepted. A configuration error would exit 2.
		select {
		case err := <-srv.done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(srv.log.String(), "no NDB support") {
				t.Fatalf("ndb mode: want exit 1 for the missing NDB driver after the configuration was accepted; got %v\n%s", err, srv.log)
			}
			srv.cmd.ProcessState = ee.ProcessState
		case <-time.After(20 * time.Second):
			t.Fatalf("ndb mode: ndbgate without the NDB driver kept running\n%s", srv.log)
		}
		t.Logf("ndb mode: configuration accepted by ndbgate (exit 1: %q); not run against a cluster", lastLine(srv.log.String()))
		return
	}

	// The kubelet's probes: startup until it succeeds, then readiness and
	// liveness once each.
	probeUntil(t, srv, g, g.StartupProbe, "startup")
	probe(t, g, g.ReadinessProbe, "readiness")
	probe(t, g, g.LivenessProbe, "liveness")

	// The app's view: the socket it is told, through its own mount, and
	// the pod-local TCP address.
	appEnv := envOf(p.app)
	sock := p.hostPath(t, p.app, appEnv["MEMCACHE_SOCKET"])
	st, err := os.Stat(sock)
	if err != nil {
		t.Fatalf("the app's MEMCACHE_SOCKET: %v\n%s", err, srv.log)
	}
	if st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o770 {
		t.Errorf("socket %s: mode %v, want a socket of mode 0770", appEnv["MEMCACHE_SOCKET"], st.Mode())
	}
	if asRoot {
		// As the kubelet runs the app: its own user, with the Pod's
		// fsGroup as a supplementary group.
		appUID := int(*p.app.SecurityContext.RunAsUser)
		sockClient(t, sock, "app-sock", appUID, []uint32{uint32(fsGroup)}, true)
		// And without the group the socket is closed to it.
		sockClient(t, sock, "app-no-group", appUID, nil, false)
	} else {
		memcacheRoundTrip(t, "unix", sock, "app-sock", "via-socket")
		t.Log("not root: the app's user and group were not emulated")
	}
	if addr := appEnv["MEMCACHE_SERVERS"]; addr != "" {
		memcacheRoundTrip(t, "tcp", addr, "app-tcp", "via-tcp")
	}

	env2 := envOf(g)
	client, scheme := httpClient(t, p, c)
	base := scheme + "://" + env2["NDBGATE_REST"]
	if c.apiKeys {
		// Data routes need a key; probes and metrics do not.
		if code := httpStatus(t, client, "GET", base+"/v1/kv/default/app-sock", ""); code != http.StatusUnauthorized {
			t.Errorf("KV read without an API key: %d, want 401", code)
		}
		if code := httpStatus(t, client, "GET", base+"/v1/kv/default/app-sock", testAPIKey); code != http.StatusOK {
			t.Errorf("KV read with the Secret's API key: %d, want 200", code)
		}
	} else if code := httpStatus(t, client, "GET", base+"/v1/kv/default/app-sock", ""); code != http.StatusOK {
		t.Errorf("KV read of the item stored over the socket: %d, want 200", code)
	}
	// The memory limit reached the engine.
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	fams := parseMetrics(t, resp.Body)
	resp.Body.Close()
	var mib float64
	fmt.Sscanf(env2["NDBGATE_MEMORY_LIMIT"], "%fm", &mib)
	if f := fams["ndbgate_engine_limit_bytes"]; f == nil || f.Metric[0].GetGauge().GetValue() != mib*(1<<20) {
		t.Errorf("ndbgate_engine_limit_bytes %v, want NDBGATE_MEMORY_LIMIT %s", f, env2["NDBGATE_MEMORY_LIMIT"])
	}
	if c.tls && !c.mutual {
		// memcache over TLS too, with the Secret's certificate.
		if a := flagValue(g.Args, "--memcache-tls"); a != "" {
			conn, err := tls.Dial("tcp", a, &tls.Config{RootCAs: p.secrets.caPool, ServerName: "ndbgate"})
			if err != nil {
				t.Fatalf("memcache TLS %s: %v", a, err)
			}
			fmt.Fprintf(conn, "version\r\n")
			buf := make([]byte, 64)
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, _ := conn.Read(buf)
			conn.Close()
			if !strings.HasPrefix(string(buf[:n]), "VERSION ") {
				t.Errorf("memcache TLS version: %q", buf[:n])
			}
		}
	}

	// Termination: SIGTERM, exit 0 well within the Pod's grace period.
	start := time.Now()
	srv.stop(t)
	if grace := time.Duration(*r.deploy.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second; time.Since(start) > grace {
		t.Errorf("ndbgate took %v to stop; the Pod's grace is %v", time.Since(start), grace)
	}
}

// ndbgateEnvNames are the environment variables ndbgate reads, from its
// source: config/settings.go's table and NDBGATE_CONFIG.
func ndbgateEnvNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, f := range []string{"config/settings.go"} {
		src, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`\{?"(NDBGATE_[A-Z_]+)"`).FindAllSubmatch(src, -1) {
			names[string(m[1])] = true
		}
	}
	if !names["NDBGATE_MEMCACHE_SOCKET"] || !names["NDBGATE_CONFIG"] {
		t.Fatalf("the environment variables in ndbgate's source were not found: %v", names)
	}
	return names
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// startServerAs starts ndbgate as the container's user and group when the
// test runs as root, so that file modes are tested as in the Pod.
func startServerAs(t *testing.T, p *pod, env []string, asRoot bool, c *corev1.Container, args ...string) *server {
	t.Helper()
	if !asRoot {
		return startServer(t, env, args...)
	}
	sc := c.SecurityContext
	uid, gid := uint32(*sc.RunAsUser), uint32(*sc.RunAsGroup)
	bin := filepath.Join(p.base, "ndbgate")
	copyFile(t, ndbgateBin, bin, 0o755)
	return startServerWith(t, bin, env, &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{gid}}}, args...)
}

func probeTarget(t *testing.T, c *corev1.Container, p *corev1.Probe) (network, addr, url string, https bool) {
	t.Helper()
	port, ok := probePort(p)
	if !ok {
		t.Fatalf("probe of a kind the test does not model: %+v", p)
	}
	n := port.IntVal
	if port.StrVal != "" {
		n = containerPort(c, port.StrVal)
	}
	addr = fmt.Sprintf("127.0.0.1:%d", n)
	if p.HTTPGet != nil {
		https = p.HTTPGet.Scheme == corev1.URISchemeHTTPS
		scheme := "http"
		if https {
			scheme = "https"
		}
		return "http", addr, scheme + "://" + addr + p.HTTPGet.Path, https
	}
	return "tcp", addr, "", false
}

// probe runs a probe once as the kubelet does: an HTTP GET that must answer
// 2xx or 3xx (HTTPS without verifying the certificate, and without a client
// certificate), or a TCP connect.
func probe(t *testing.T, c *corev1.Container, p *corev1.Probe, what string) {
	t.Helper()
	if err := probeOnce(t, c, p); err != nil {
		t.Errorf("%s probe: %v", what, err)
	}
}

func probeOnce(t *testing.T, c *corev1.Container, p *corev1.Probe) error {
	network, addr, url, _ := probeTarget(t, c, p)
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if network == "tcp" {
		conn, err := net.DialTimeout("tcp", addr, timeout)
		if err == nil {
			conn.Close()
		}
		return err
	}
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// probeUntil runs the startup probe every periodSeconds until it succeeds;
// failureThreshold failures fail the test, as the kubelet would restart the
// container.
func probeUntil(t *testing.T, srv *server, c *corev1.Container, p *corev1.Probe, what string) {
	t.Helper()
	period := time.Duration(p.PeriodSeconds) * time.Second
	var err error
	for i := int32(0); i < p.FailureThreshold; i++ {
		select {
		case e := <-srv.done:
			srv.done <- e
			t.Fatalf("ndbgate exited (%v) during its %s probe\n%s", e, what, srv.log)
		default:
		}
		if err = probeOnce(t, c, p); err == nil {
			return
		}
		time.Sleep(period)
	}
	t.Fatalf("%s probe failed %d times: %v\n%s", what, p.FailureThreshold, err, srv.log)
}
