// Command ndbgate is a NoSQL gateway for MySQL NDB Cluster and RonDB: memcached
// (and later REST and gRPC) requests become native NDB operations. With no
// cluster configured it serves from its embedded engine.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/ndbgate/ndbgate/config"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "version", "--version", "-v":
		fmt.Fprintf(stdout, "ndbgate %s (%s, %s/%s, drivers: %s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH, driversBuilt())
		return 0
	case "serve":
		cfg, err := loadConfig(args[1:], os.LookupEnv, stderr)
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if err != nil {
			fmt.Fprintf(stderr, "ndbgate: %v\n", err)
			return 2
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		if err := serve(ctx, cfg, newLogger(cfg.Log, stderr)); err != nil {
			fmt.Fprintf(stderr, "ndbgate: %v\n", err)
			return 1
		}
		return 0
	case "ndb-create-tables":
		rest, recreate := withoutFlag(args[1:], "--recreate")
		rest, itemState := withoutFlag(rest, "--item-state")
		rest, ndbmemcache := withoutFlag(rest, "--ndbmemcache-config")
		cfg, err := loadConfig(rest, os.LookupEnv, stderr)
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if err == nil && cfg.NDB.Connectstring == "" {
			err = errors.New("ndb-create-tables needs --ndb-connectstring (or ndb.connectstring)")
		}
		if err == nil {
			err = createNDBTables(cfg, tableOptions{recreate: recreate, itemState: itemState, ndbmemcache: ndbmemcache}, newLogger(cfg.Log, stderr), stdout)
		}
		if err != nil {
			fmt.Fprintf(stderr, "ndbgate: %v\n", err)
			return 1
		}
		return 0
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "ndbgate: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  ndbgate serve [--config FILE] [--memcache ADDR] [--rest ADDR] [--grpc ADDR]
                [--item-size-max N] [--memory-limit N] [--ndb-connectstring CS] ...
  ndbgate ndb-create-tables --ndb-connectstring CS [--config FILE] [--recreate]
                [--item-state] [--ndbmemcache-config]
                creates, through NdbDictionary, the tables the config needs
                that the cluster lacks (for clusters without a MySQL server;
                a mysqld does not see tables made this way); --recreate drops
                them first, so they start empty; --item-state gives the
                default container's demo_table an item_state column, where
                the meta protocol's item state (h, l, W/X/Z) is kept;
                --ndbmemcache-config also makes ndbmemcache's configuration
                tables and rows, so that MySQL Cluster's own memcached
                (ndb_engine) can serve the same demo_table
  ndbgate version

Run "ndbgate serve --help" for every flag.
`)
}

// loadConfig layers defaults, the YAML file, NDBGATE_* env and flags (last wins).
func loadConfig(args []string, lookup func(string) (string, bool), stderr io.Writer) (config.Config, error) {
	cfg := config.Default()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		file              = fs.String("config", "", "YAML config file (env NDBGATE_CONFIG)")
		memcacheAddr      = fs.String("memcache", cfg.Listeners.Memcache, "memcache listener host:port; empty turns it off")
		restAddr          = fs.String("rest", cfg.Listeners.REST, "HTTP listener (metrics, health; REST API) host:port; empty turns it off")
		grpcAddr          = fs.String("grpc", cfg.Listeners.GRPC, "gRPC listener host:port; empty turns it off")
		connectstring     = fs.String("ndb-connectstring", "", "NDB management server(s), host:1186[,host2:1186]; empty = embedded engine")
		poolSize          = fs.Int("ndb-pool-size", cfg.NDB.PoolSize, "NDB cluster connections in the pool")
		partitions        = fs.Int("partitions", cfg.Embedded.Partitions, "embedded engine: partitions per table")
		nodes             = fs.Int("nodes", cfg.Embedded.Nodes, "embedded engine: simulated data nodes")
		maxConns          = fs.Int("max-connections", cfg.Limits.MaxConnections, "memcache: most open connections (memcached -c)")
		logLevel          = fs.String("log-level", cfg.Log.Level, "debug, info, warn or error")
		mcSocket          = fs.String("memcache-socket", "", "memcache: also serve this unix-socket path (memcached -s)")
		mcEventLoop       = fs.String("memcache-event-loop", cfg.Memcache.EventLoop, "memcache: event loop for TCP and unix sockets, epoll (Linux default) or gnet")
		mcIOUring         = fs.Bool("memcache-io-uring", cfg.Memcache.IOUringOn(), "memcache: epoll loops batch each turn's reads and replies into one io_uring_enter where the kernel allows it")
		mcSocketMode      = fs.String("memcache-socket-mode", cfg.Memcache.SocketMode, "memcache: unix-socket permissions, octal (memcached -a)")
		mcTLS             = fs.String("memcache-tls", "", "memcache: also serve TLS on host:port (needs --tls-cert and --tls-key)")
		tlsCert           = fs.String("tls-cert", "", "TLS certificate file (PEM)")
		tlsKey            = fs.String("tls-key", "", "TLS private key file (PEM)")
		tlsClientCA       = fs.String("tls-client-ca", "", "require client certificates signed by these CAs (PEM): mutual TLS")
		saslFile          = fs.String("memcache-sasl-credentials", "", "memcache: require SASL PLAIN with the user:password lines of this file (binary protocol only, as memcached -S)")
		apiKeys           = fs.String("api-keys", "", "REST/gRPC: require API keys from this YAML file (header X-API-KEY)")
		apiTLS            = fs.Bool("api-tls", false, "REST/gRPC: serve TLS only, with --tls-cert/--tls-key (mutual TLS with --tls-client-ca)")
		logFormat         = fs.String("log-format", cfg.Log.Format, "text or json")
		dataDir           = fs.String("data-dir", "", "embedded engine: keep tables and rows in this directory (a log and snapshots), so they survive restarts and crashes; empty = memory only")
		fsyncMode         = fs.String("fsync", cfg.Embedded.Fsync, "with --data-dir: always (a write is acknowledged once on disk), everysec or no")
		itemSizeMax       config.ByteSize
		memoryLimit       config.ByteSize
		itemSizeMaxString = cfg.Limits.ItemSizeMax.String()
	)
	fs.Func("item-size-max", "largest value, e.g. 1m (memcached -I); default "+itemSizeMaxString, func(s string) error { return itemSizeMax.Set(s) })
	var simRTT config.Duration
	fs.Func("simulated-round-trip", "embedded engine, benchmarks only: delay every backend round trip by this much (e.g. 100us)", func(s string) error { return simRTT.Set(s) })
	fs.Func("memory-limit", "embedded engine memory limit, e.g. 512m; 0 = none (memcached -m)", func(s string) error { return memoryLimit.Set(s) })
	var snapInterval config.Duration
	var snapLogSize config.ByteSize
	fs.Func("snapshot-interval", "with --data-dir: snapshot this often if anything changed, e.g. 30m; 0 = never (default 1h)", func(s string) error { return snapInterval.Set(s) })
	fs.Func("snapshot-log-size", "with --data-dir: snapshot once the log since the last one is this big (and at least the snapshot's size), e.g. 64m; 0 = never", func(s string) error { return snapLogSize.Set(s) })
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	path := *file
	if path == "" {
		path, _ = lookup("NDBGATE_CONFIG")
	}
	if path != "" {
		if err := cfg.LoadFile(path); err != nil {
			return cfg, err
		}
	}
	if err := cfg.ApplyEnv(lookup); err != nil {
		return cfg, err
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "memcache":
			cfg.Listeners.Memcache = *memcacheAddr
		case "rest":
			cfg.Listeners.REST = *restAddr
		case "grpc":
			cfg.Listeners.GRPC = *grpcAddr
		case "ndb-connectstring":
			cfg.NDB.Connectstring = *connectstring
		case "ndb-pool-size":
			cfg.NDB.PoolSize = *poolSize
		case "partitions":
			cfg.Embedded.Partitions = *partitions
		case "nodes":
			cfg.Embedded.Nodes = *nodes
		case "max-connections":
			cfg.Limits.MaxConnections = *maxConns
		case "log-level":
			cfg.Log.Level = *logLevel
		case "memcache-socket":
			cfg.Memcache.Socket = *mcSocket
		case "memcache-event-loop":
			cfg.Memcache.EventLoop = *mcEventLoop
		case "memcache-io-uring":
			cfg.Memcache.IOUring = mcIOUring
		case "memcache-socket-mode":
			cfg.Memcache.SocketMode = *mcSocketMode
		case "memcache-tls":
			cfg.Memcache.TLS.Listen = *mcTLS
		case "tls-cert":
			cfg.Memcache.TLS.CertFile, cfg.API.TLS.CertFile = *tlsCert, *tlsCert
		case "tls-key":
			cfg.Memcache.TLS.KeyFile, cfg.API.TLS.KeyFile = *tlsKey, *tlsKey
		case "tls-client-ca":
			cfg.Memcache.TLS.ClientCAFile, cfg.API.TLS.ClientCAFile = *tlsClientCA, *tlsClientCA
		case "api-keys":
			cfg.API.KeysFile = *apiKeys
		case "api-tls":
			cfg.API.TLS.Enabled = *apiTLS
		case "memcache-sasl-credentials":
			cfg.Memcache.SASLCredentialsFile = *saslFile
		case "log-format":
			cfg.Log.Format = *logFormat
		case "item-size-max":
			cfg.Limits.ItemSizeMax = itemSizeMax
		case "memory-limit":
			cfg.Embedded.MemoryLimit = memoryLimit
		case "simulated-round-trip":
			cfg.Embedded.SimulatedRoundTrip = simRTT
		case "data-dir":
			cfg.Embedded.DataDir = *dataDir
		case "fsync":
			cfg.Embedded.Fsync = *fsyncMode
		case "snapshot-interval":
			cfg.Embedded.SnapshotInterval = snapInterval
		case "snapshot-log-size":
			cfg.Embedded.SnapshotLogSize = snapLogSize
		}
	})
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return cfg, nil
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// shutdownGrace bounds how long in-flight requests may take after a signal.
const shutdownGrace = 10 * time.Second

// withoutFlag returns args without every occurrence of flag, and whether it
// was there.
func withoutFlag(args []string, flag string) ([]string, bool) {
	var out []string
	found := false
	for _, a := range args {
		if a == flag {
			found = true
			continue
		}
		out = append(out, a)
	}
	return out, found
}
