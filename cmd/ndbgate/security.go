package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/ndbgate/ndbgate/config"
	"github.com/ndbgate/ndbgate/gateway/auth"
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
	tc, err := loadTLS(c.TLS.CertFile, c.TLS.KeyFile, c.TLS.ClientCAFile, "memcache")
	if err != nil {
		return out, err
	}
	out.TLSAddr, out.TLS = c.TLS.Listen, tc
	return out, nil
}

// apiSecurity loads the REST and gRPC front ends' API keys and TLS.
func apiSecurity(c config.API) (*auth.Keys, *tls.Config, error) {
	var keys *auth.Keys
	if c.KeysFile != "" {
		k, err := auth.Load(c.KeysFile)
		if err != nil {
			return nil, nil, fmt.Errorf("%w (api.keys_file, --api-keys)", err)
		}
		keys = k
	}
	if !c.TLS.Enabled {
		return keys, nil, nil
	}
	tc, err := loadTLS(c.TLS.CertFile, c.TLS.KeyFile, c.TLS.ClientCAFile, "api")
	return keys, tc, err
}

// loadTLS builds a server TLS config; a client CA file turns on mutual TLS.
func loadTLS(certFile, keyFile, clientCAFile, what string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%s TLS certificate (--tls-cert %s, --tls-key %s): %w", what, certFile, keyFile, err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("%s TLS client CA (--tls-client-ca): %w", what, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s TLS client CA (--tls-client-ca %s): no PEM certificates in the file", what, clientCAFile)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
}
