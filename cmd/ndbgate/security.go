package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/ndbgate/ndbgate/config"
	"github.com/ndbgate/ndbgate/protocols/memcache"
)

// memcacheSecurity loads what the memcache listeners need from files: TLS
// certificates and SASL credentials. Errors name the file and the setting.
func memcacheSecurity(c config.Memcache) (memcache.Config, error) {
	var out memcache.Config
	out.Socket = c.Socket
	mode, err := c.SocketFileMode()
	if err != nil {
		return out, err
	}
	out.SocketMode = mode
	if c.SASLCredentialsFile != "" {
		creds, err := memcache.LoadCredentials(c.SASLCredentialsFile)
		if err != nil {
			return out, fmt.Errorf("%w (memcache.sasl_credentials_file, --memcache-sasl-credentials)", err)
		}
		out.Credentials = creds
	}
	if c.TLS.Listen == "" {
		return out, nil
	}
	cert, err := tls.LoadX509KeyPair(c.TLS.CertFile, c.TLS.KeyFile)
	if err != nil {
		return out, fmt.Errorf("memcache TLS certificate (--tls-cert %s, --tls-key %s): %w", c.TLS.CertFile, c.TLS.KeyFile, err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.TLS.ClientCAFile != "" {
		pem, err := os.ReadFile(c.TLS.ClientCAFile)
		if err != nil {
			return out, fmt.Errorf("memcache TLS client CA (--tls-client-ca): %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return out, fmt.Errorf("memcache TLS client CA (--tls-client-ca %s): no PEM certificates in the file", c.TLS.ClientCAFile)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	out.TLSAddr, out.TLS = c.TLS.Listen, tc
	return out, nil
}
