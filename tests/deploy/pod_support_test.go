package deploy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// openTempDir is a temporary directory that the Pod's users (ndbgate's and
// the app's) can traverse, removed when the test ends.
func openTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ndbgate-pod-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func chownMode(t testing.TB, path string, uid, gid int, mode os.FileMode) {
	t.Helper()
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
	// os.Chmod takes the setgid bit as os.ModeSetgid, not 0o2000.
	m := mode.Perm()
	if mode&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if err := os.Chmod(path, m); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes a volume's file as the kubelet does: owned by root and
// the Pod's fsGroup (when the test runs as root), with the volume's mode.
func writeFile(t testing.TB, path string, data []byte, uid, gid int, mode os.FileMode, asRoot bool) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if asRoot {
		chownMode(t, path, uid, gid, mode)
	} else if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t testing.TB, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(to, mode); err != nil {
		t.Fatal(err)
	}
}

const testAPIKey = "deploy-test-key-0123456789abcdef"

// testSecrets are the Secrets the chart's cases name: API keys, and a CA
// with a server certificate (for 127.0.0.1) and a client certificate.
type testSecrets struct {
	data   map[string]map[string][]byte
	caPool *x509.CertPool
	client tls.Certificate
}

func newTestSecrets(t testing.TB) *testSecrets {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "deploy-test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(cn string, usage x509.ExtKeyUsage, serial int64) (certPEM, keyPEM []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: []string{cn}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	}
	srvCert, srvKey := issue("ndbgate", x509.ExtKeyUsageServerAuth, 2)
	cliCert, cliKey := issue("app", x509.ExtKeyUsageClientAuth, 3)
	client, err := tls.X509KeyPair(cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	keys := []byte(fmt.Sprintf("keys:\n  - name: app\n    key: %q\n    grants: [\"*\"]\n", testAPIKey))
	return &testSecrets{
		data: map[string]map[string][]byte{
			"ndbgate-keys": {"api-keys.yaml": keys, "keys.yaml": keys},
			"ndbgate-tls": {"tls.crt": srvCert, "tls.key": srvKey,
				"ca.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})},
		},
		caPool: pool, client: client,
	}
}

func (s *testSecrets) get(t testing.TB, name string) map[string][]byte {
	t.Helper()
	d, ok := s.data[name]
	if !ok {
		t.Fatalf("the chart mounts Secret %q, which the test does not make", name)
	}
	return d
}

// httpClient reaches the case's REST port: TLS verified against the test
// CA, with the client certificate under mutual TLS.
func httpClient(t testing.TB, p *pod, c chartCase) (*http.Client, string) {
	t.Helper()
	if !c.tls {
		return &http.Client{Timeout: 5 * time.Second}, "http"
	}
	tc := &tls.Config{RootCAs: p.secrets.caPool}
	if c.mutual {
		tc.Certificates = []tls.Certificate{p.secrets.client}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}, "https"
}

func httpStatus(t testing.TB, client *http.Client, method, url, apiKey string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if apiKey != "" {
		req.Header.Set("X-API-KEY", apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

var (
	sockClientOnce sync.Once
	sockClientBin  string
	sockClientErr  error
)

// sockClientBinary builds ./sockclient, static, once.
func sockClientBinary(t testing.TB) string {
	t.Helper()
	sockClientOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ndbgate-sockclient-")
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
		if err != nil {
			sockClientErr = err
			return
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			sockClientErr = err
			return
		}
		sockClientBin = filepath.Join(dir, "sockclient")
		cmd := exec.Command("go", "build", "-trimpath", "-o", sockClientBin, "./sockclient")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			sockClientErr = fmt.Errorf("go build ./sockclient: %v\n%s", err, out)
		}
	})
	if sockClientErr != nil {
		t.Fatal(sockClientErr)
	}
	return sockClientBin
}

// sockClient runs the app (sockclient) against the socket as uid with the
// supplementary groups, and checks that it succeeds or is refused.
func sockClient(t testing.TB, sock, key string, uid int, groups []uint32, wantOK bool) {
	t.Helper()
	cmd := exec.Command(sockClientBinary(t), "-unix", sock, "-key", key, "-value", "via-socket")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: groups}}
	out, err := cmd.CombinedOutput()
	switch {
	case wantOK && err != nil:
		t.Errorf("the app (uid %d, groups %v) could not use the socket: %v\n%s", uid, groups, err, out)
	case !wantOK && err == nil:
		t.Errorf("the app (uid %d, groups %v) used the socket without the Pod's group: it is open to everyone\n%s", uid, groups, out)
	case !wantOK && !strings.Contains(string(out), "permission denied"):
		t.Errorf("the app without the group failed, but not for permissions: %s", out)
	}
}
