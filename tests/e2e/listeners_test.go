package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnixSocket serves memcache on a unix socket next to TCP: gomemcache
// dials the path, the socket gets the configured mode, and both listeners see
// the same items.
func TestUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "ndbgate.sock")
	s := startServer(t, "--memcache-socket", sock, "--memcache-socket-mode", "0660")
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o660), fi.Mode().Perm())
	assert.NotZero(t, fi.Mode()&os.ModeSocket)

	viaSock := newClient(t, sock) // gomemcache takes a path as a unix address
	require.NoError(t, viaSock.Set(&memcache.Item{Key: "u:a", Value: []byte("over unix"), Flags: 3}))
	requireItem(t, newClient(t, s.memcacheAddr), "u:a", "over unix", 3)
	require.NoError(t, newClient(t, s.memcacheAddr).Set(&memcache.Item{Key: "u:b", Value: []byte("over tcp")}))
	requireItem(t, viaSock, "u:b", "over tcp", 0)

	c := dialRawNet(t, "unix", sock)
	c.roundTrip("mg u:a v f\r\n", "VA 9 f3\r\nover unix\r\n")
	c.roundTrip("version\r\n", "VERSION "+memcacheVersionOf(t, c)+"\r\n")
}

// memcacheVersionOf asks the server for its version string.
func memcacheVersionOf(t *testing.T, c *rawConn) string {
	t.Helper()
	c.send("version\r\n")
	line := c.readLine()
	require.Regexp(t, `^VERSION \S+\r\n$`, line)
	return line[len("VERSION ") : len(line)-2]
}

func dialRawNet(t testing.TB, network, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout(network, addr, ioTimeout)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nc.Close() })
	return wrapRaw(t, nc)
}

// testPKI is a throwaway CA with a server and a client certificate.
type testPKI struct {
	dir                       string
	caFile, certFile, keyFile string
	clientCert                tls.Certificate
	roots                     *x509.CertPool
	otherClient               tls.Certificate // signed by a CA the server does not trust
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	ca, caKey := makeCert(t, nil, nil, "ndbgate test CA", true)
	srv, srvKey := makeCert(t, ca, caKey, "127.0.0.1", false)
	cli, cliKey := makeCert(t, ca, caKey, "client", false)
	other, otherKey := makeCert(t, nil, nil, "stranger", false)
	p.caFile = writePEM(t, p.dir, "ca.pem", "CERTIFICATE", ca.Raw)
	p.certFile = writePEM(t, p.dir, "server.pem", "CERTIFICATE", srv.Raw)
	p.keyFile = writeKey(t, p.dir, "server.key", srvKey)
	p.roots = x509.NewCertPool()
	p.roots.AddCert(ca)
	p.clientCert = tls.Certificate{Certificate: [][]byte{cli.Raw}, PrivateKey: cliKey}
	p.otherClient = tls.Certificate{Certificate: [][]byte{other.Raw}, PrivateKey: otherKey}
	return p
}

func makeCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:         isCA, BasicConstraintsValid: true,
	}
	if !isCA {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return cert, key
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return path
}

func writeKey(t *testing.T, dir, name string, key *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return writePEM(t, dir, name, "EC PRIVATE KEY", der)
}

// TestTLSListener serves memcache over mutual TLS: gomemcache with a TLS
// dialer and a client certificate works, a client without one or with an
// untrusted one is refused, and plain TCP still serves the same items.
func TestTLSListener(t *testing.T) {
	pki := newTestPKI(t)
	tlsAddr := freePort(t)
	s := startServer(t, "--memcache-tls", tlsAddr, "--tls-cert", pki.certFile, "--tls-key", pki.keyFile, "--tls-client-ca", pki.caFile)

	cfg := &tls.Config{RootCAs: pki.roots, Certificates: []tls.Certificate{pki.clientCert}, ServerName: "127.0.0.1"}
	mc := memcache.New(tlsAddr)
	mc.Timeout = ioTimeout
	mc.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := tls.Dialer{Config: cfg}
		return d.DialContext(ctx, network, addr)
	}
	t.Cleanup(func() { _ = mc.Close() })
	require.NoError(t, mc.Set(&memcache.Item{Key: "tls:a", Value: []byte("secret"), Flags: 9}))
	requireItem(t, mc, "tls:a", "secret", 9)
	requireItem(t, newClient(t, s.memcacheAddr), "tls:a", "secret", 9)
	for i := 0; i < 50; i++ { // many round trips on pooled TLS connections
		require.NoError(t, mc.Set(&memcache.Item{Key: "tls:n", Value: []byte{byte('a' + i%26)}}))
	}
	n, err := mc.Increment("tls:none", 1)
	assert.ErrorIs(t, err, memcache.ErrCacheMiss, "incr of a missing key (got %d)", n)

	// Pipelined meta and binary over TLS, byte for byte.
	tc, err := tls.Dial("tcp", tlsAddr, cfg)
	require.NoError(t, err)
	c := wrapRaw(t, tc)
	c.roundTrip("mg tls:a v f q\r\nmg tls:none v q\r\nmn\r\n", "VA 6 f9\r\nsecret\r\nMN\r\n")
	bc, err := tls.Dial("tcp", tlsAddr, cfg)
	require.NoError(t, err)
	_, err = bc.Write(binRequest(0x0b, nil, nil, nil, 7)) // VERSION
	require.NoError(t, err)
	hdr := make([]byte, 24)
	_, err = io.ReadFull(bc, hdr)
	require.NoError(t, err)
	assert.Equal(t, byte(0x81), hdr[0])
	assert.Equal(t, uint32(7), binary.BigEndian.Uint32(hdr[12:]))
	_ = bc.Close()

	// No client certificate, or one from another CA: the handshake fails.
	for name, certs := range map[string][]tls.Certificate{"none": nil, "untrusted": {pki.otherClient}} {
		bad, err := tls.Dial("tcp", tlsAddr, &tls.Config{RootCAs: pki.roots, Certificates: certs, ServerName: "127.0.0.1"})
		if err == nil {
			_ = bad.SetDeadline(time.Now().Add(ioTimeout))
			_, _ = bad.Write([]byte("version\r\n"))
			_, err = bad.Read(make([]byte, 64))
			_ = bad.Close()
		}
		assert.Error(t, err, "client certificate %s must be refused", name)
	}
	c.roundTrip("mn\r\n", "MN\r\n") // the good connection is unaffected
}

// binRequest builds a binary-protocol request.
func binRequest(op byte, key, extras, value []byte, opaque uint32) []byte {
	b := make([]byte, 24, 24+len(extras)+len(key)+len(value))
	b[0], b[1] = 0x80, op
	binary.BigEndian.PutUint16(b[2:], uint16(len(key)))
	b[4] = byte(len(extras))
	binary.BigEndian.PutUint32(b[8:], uint32(len(extras)+len(key)+len(value)))
	binary.BigEndian.PutUint32(b[12:], opaque)
	return append(append(append(b, extras...), key...), value...)
}

// readBinResponse reads one binary response: status, opaque and body.
func readBinResponse(t *testing.T, c *rawConn) (status uint16, opaque uint32, body string) {
	t.Helper()
	hdr, err := c.readN(24)
	require.NoError(t, err)
	require.Equal(t, byte(0x81), hdr[0], "response magic")
	n := int(binary.BigEndian.Uint32([]byte(hdr[8:12])))
	body, err = c.readN(n)
	require.NoError(t, err)
	return binary.BigEndian.Uint16([]byte(hdr[6:8])), binary.BigEndian.Uint32([]byte(hdr[12:16])), body
}

// TestSASL requires SASL PLAIN from a credentials file: before auth only the
// SASL commands and VERSION answer (anything else gets "Auth failure." and a
// hang-up), text connections are closed, bad credentials are refused, good
// ones open the connection; the counters show it.
func TestSASL(t *testing.T) {
	creds := filepath.Join(t.TempDir(), "users")
	require.NoError(t, os.WriteFile(creds, []byte("# test users\nalice:wonderland\nbob:builder\n"), 0o600))
	s := startServer(t, "--memcache-sasl-credentials", creds)

	text := dialRaw(t, s.memcacheAddr)
	text.send("version\r\n")
	text.expectClosed()

	c := dialRaw(t, s.memcacheAddr)
	c.send(string(binRequest(0x20, nil, nil, nil, 1)))
	st, op, body := readBinResponse(t, c)
	assert.Equal(t, [3]any{uint16(0), uint32(1), "PLAIN"}, [3]any{st, op, body})
	c.send(string(binRequest(0x0b, nil, nil, nil, 2))) // VERSION is allowed
	st, _, _ = readBinResponse(t, c)
	assert.Equal(t, uint16(0), st)
	c.send(string(binRequest(0x21, []byte("PLAIN"), nil, []byte("\x00alice\x00wrong"), 3)))
	st, op, body = readBinResponse(t, c)
	assert.Equal(t, [3]any{uint16(0x20), uint32(3), "Auth failure."}, [3]any{st, op, body})
	c.send(string(binRequest(0x21, []byte("CRAM-MD5"), nil, []byte("alice wonderland"), 4)))
	st, _, _ = readBinResponse(t, c)
	assert.Equal(t, uint16(0x20), st)
	c.send(string(binRequest(0x21, []byte("PLAIN"), nil, []byte("\x00alice\x00wonderland"), 5)))
	st, op, body = readBinResponse(t, c)
	assert.Equal(t, [3]any{uint16(0), uint32(5), "Authenticated"}, [3]any{st, op, body})
	c.send(string(binRequest(0x01, []byte("s:a"), make([]byte, 8), []byte("v"), 6))) // SET
	st, _, _ = readBinResponse(t, c)
	assert.Equal(t, uint16(0), st)
	c.send(string(binRequest(0x00, []byte("s:a"), nil, nil, 7))) // GET
	st, _, body = readBinResponse(t, c)
	assert.Equal(t, uint16(0), st)
	assert.Equal(t, "\x00\x00\x00\x00v", body)

	// A command before authenticating: "Auth failure." and the connection closes.
	u := dialRaw(t, s.memcacheAddr)
	u.send(string(binRequest(0x00, []byte("s:a"), nil, nil, 8)))
	st, op, body = readBinResponse(t, u)
	assert.Equal(t, [3]any{uint16(0x20), uint32(8), "Auth failure."}, [3]any{st, op, body})
	u.expectClosed()

	// Counters: stats over the authenticated binary connection (STAT, key "").
	c.send(string(binRequest(0x10, nil, nil, nil, 9)))
	stats := map[string]string{}
	for {
		hdr, err := c.readN(24)
		require.NoError(t, err)
		kl := int(binary.BigEndian.Uint16([]byte(hdr[2:4])))
		n := int(binary.BigEndian.Uint32([]byte(hdr[8:12])))
		b, err := c.readN(n)
		require.NoError(t, err)
		if kl == 0 {
			break
		}
		stats[b[:kl]] = b[kl:]
	}
	assert.Equal(t, "3", stats["auth_cmds"])
	assert.Equal(t, "2", stats["auth_errors"])
	assert.Equal(t, "2", stats["ndbgate_auth_refused"])
	samples := parseMetrics(t, func() string { _, b := s.httpGet(t, "/metrics"); return b }())
	assert.Equal(t, 1.0, metricSum(samples, "ndbgate_memcache_auth_total", map[string]string{"outcome": "ok"}))
	assert.Equal(t, 2.0, metricSum(samples, "ndbgate_memcache_auth_total", map[string]string{"outcome": "failure"}))
	assert.Positive(t, metricSum(samples, "ndbgate_memcache_commands_total", map[string]string{"dialect": "binary"}))
}
