// Package config is ndbgate's one configuration model, read from a YAML file,
// then NDBGATE_* environment variables, then command-line flags (last wins), and
// validated at start-up with messages that say what to fix.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is the whole configuration.
type Config struct {
	Listeners   Listeners      `yaml:"listeners"`
	Memcache    Memcache       `yaml:"memcache"`
	NDB         NDB            `yaml:"ndb"`
	Embedded    Embedded       `yaml:"embedded"`
	Dispatch    Dispatch       `yaml:"dispatch"`
	Tables      []Table        `yaml:"tables"`
	API         API            `yaml:"api"`
	Containers  []Container    `yaml:"containers"`
	KeyPrefixes []KeyPrefix    `yaml:"key_prefixes"`
	Limits      Limits         `yaml:"limits"`
	Log         Log            `yaml:"log"`
	Extra       map[string]any `yaml:",inline"`
}

// Listeners holds one address per front end; an empty address turns it off.
type Listeners struct {
	Memcache string `yaml:"memcache"`
	REST     string `yaml:"rest"`
	GRPC     string `yaml:"grpc"`
}

// Memcache configures the memcache front end beyond its TCP address.
type Memcache struct {
	// Socket is a unix-socket path served as well (memcached -s); SocketMode
	// its permissions in octal (memcached -a), default 0700.
	Socket     string `yaml:"socket"`
	SocketMode string `yaml:"socket_mode"`
	TLS        TLS    `yaml:"tls"`
	// SASLCredentialsFile, when set, requires SASL PLAIN with the users of this
	// file ("user:password" lines). As under memcached -S, only the binary
	// protocol is then served.
	SASLCredentialsFile string `yaml:"sasl_credentials_file"`
	// EventLoop serves the TCP and unix-socket listeners: "epoll" (Linux's
	// default: ndbgate's own loops) or "gnet". Empty picks the platform's.
	EventLoop string `yaml:"event_loop"`
	// IOUring lets each epoll loop run a turn's socket reads, and its replies,
	// as one io_uring_enter each, where the kernel allows io_uring; default
	// true. Where it does not (an old kernel, a seccomp profile that blocks
	// it), the loops make one syscall per read and write, as when false.
	IOUring *bool `yaml:"io_uring"`
}

// IOUringOn is IOUring with its default (true) applied.
func (m Memcache) IOUringOn() bool { return m.IOUring == nil || *m.IOUring }

// TLS is the memcache TLS listener. ClientCAFile turns on mutual TLS: clients
// must present a certificate signed by one of its CAs.
type TLS struct {
	Listen       string `yaml:"listen"`
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
}

// NDB selects a real cluster. An empty connectstring means the embedded engine.
type NDB struct {
	Connectstring string `yaml:"connectstring"`
	PoolSize      int    `yaml:"pool_size"`
}

// Embedded configures the in-process engine.
type Embedded struct {
	MemoryLimit  ByteSize `yaml:"memory_limit"`
	Partitions   int      `yaml:"partitions"`
	Nodes        int      `yaml:"nodes"`
	ReapInterval Duration `yaml:"reap_interval"`
	// SimulatedRoundTrip makes every backend round complete this much later,
	// as a data node round trip would: for measuring batching and coalescing
	// on one machine. Benchmarks only; never the default.
	SimulatedRoundTrip Duration `yaml:"simulated_round_trip"`
	// DataDir keeps the tables and rows there (a log and snapshots), so that
	// they come back after a restart or a crash. Empty: memory only.
	DataDir string `yaml:"data_dir"`
	// Fsync is when the log reaches the disk: always (before a write is
	// acknowledged), everysec or no (the OS decides).
	Fsync string `yaml:"fsync"`
	// SnapshotInterval: a snapshot this often if anything changed; 0 never.
	SnapshotInterval Duration `yaml:"snapshot_interval"`
	// SnapshotLogSize: a snapshot once the log since the last one is this
	// big and at least as big as that snapshot; 0 never.
	SnapshotLogSize ByteSize `yaml:"snapshot_log_size"`
}

// Dispatch tunes the backend dispatcher (ndbclient): rounds, coalescing,
// admission, retries. Lanes (per-node queues with coalescing) are on for the
// NDB driver and for the embedded engine with a simulated round trip.
type Dispatch struct {
	RoundSize     int   `yaml:"round_size"`       // ops per round trip, default 128, at most 1024
	Coalesce      *bool `yaml:"coalesce"`         // merge queued requests of a node into one round trip; default true
	RoundsPerNode int   `yaml:"rounds_per_node"`  // round trips in flight per data node, default 1
	MaxInFlight   int   `yaml:"max_inflight_ops"` // past it requests fail fast with Overloaded, default 65536
	MaxRetries    int   `yaml:"max_retries"`      // retries of Temporary errors, default 3
}

// Table declares a table of the embedded engine, for the row API (REST, gRPC).
// With an NDB cluster the table comes from the cluster's dictionary instead,
// and a declared table only has to match it.
type Table struct {
	Database        string        `yaml:"database"`
	Name            string        `yaml:"name"`
	Columns         []TableColumn `yaml:"columns"`
	PrimaryKey      []string      `yaml:"primary_key"`
	DistributionKey []string      `yaml:"distribution_key"` // default: the primary key
	Partitions      int           `yaml:"partitions"`       // default: embedded.partitions
}

// TableColumn is one column; Type in MySQL's spelling, e.g. "VARCHAR(64)",
// "INT UNSIGNED", "DECIMAL(10,2)".
type TableColumn struct {
	Name     string `yaml:"name"`
	Type     string `yaml:"type"`
	Nullable bool   `yaml:"nullable"`
}

// API configures the REST and gRPC front ends.
type API struct {
	// KeysFile, when set, requires an API key (header X-API-KEY, gRPC metadata
	// x-api-key or RonDB's APIKey field) on every data request; see gateway/auth.
	KeysFile string `yaml:"keys_file"`
	// TLS, when Enabled, serves REST and gRPC over TLS only (mutual TLS with
	// ClientCAFile).
	TLS    APITLS    `yaml:"tls"`
	Limits APILimits `yaml:"limits"`
}

// APITLS is TLS for the REST and gRPC listeners.
type APITLS struct {
	Enabled      bool   `yaml:"enabled"`
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
}

// APILimits bound what one REST or gRPC request may ask for.
type APILimits struct {
	MaxBatch      int      `yaml:"max_batch"`      // operations in a batch, default 256
	MaxBody       ByteSize `yaml:"max_body"`       // request body, default 4m
	MaxFilters    int      `yaml:"max_filters"`    // filters of one pk-read, default 64
	MaxColumns    int      `yaml:"max_columns"`    // read columns of one pk-read, default 256
	MaxIdentifier int      `yaml:"max_identifier"` // db, table, column names, default 64
	MaxMultiGet   int      `yaml:"max_multi_get"`  // keys of a KV multi-get, default 256
}

// Container maps memcached items onto a table's columns, as in ndbmemcache.
// Only Name, Table and the key/value columns are required.
type Container struct {
	Name         string   `yaml:"name"`
	Database     string   `yaml:"database"`
	Table        string   `yaml:"table"`
	KeyColumns   []string `yaml:"key_columns"`
	ValueColumns []string `yaml:"value_columns"`
	FlagsColumn  string   `yaml:"flags_column"`
	CasColumn    string   `yaml:"cas_column"`
	ExpireColumn string   `yaml:"expire_column"`
	MathColumn   string   `yaml:"math_column"`
	// StateColumn: a BIGINT UNSIGNED column where the NDB driver keeps
	// memcached's item state (the meta protocol's h, l and W/X/Z flags).
	StateColumn string `yaml:"state_column"`
	// Eviction: LRU-evict rows of this container's table when the embedded
	// engine's memory limit is reached (cache semantics). Default true.
	Eviction *bool `yaml:"eviction"`
}

// KeyPrefix routes keys starting with Prefix to a container under a policy.
type KeyPrefix struct {
	Prefix    string `yaml:"prefix"`
	Container string `yaml:"container"`
	Policy    string `yaml:"policy"` // ndb-only (default), caching, local-only
}

// Limits bound what clients may send.
type Limits struct {
	ItemSizeMax    ByteSize `yaml:"item_size_max"`
	MaxConnections int      `yaml:"max_connections"`
	// MaxPendingPerConn bounds replies awaiting completion on one connection;
	// past it the server stops reading that connection until replies go out.
	MaxPendingPerConn int `yaml:"max_pending_per_conn"`
}

// Log configures log/slog.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // text, json
}

// Default returns the configuration used when nothing is set.
func Default() Config {
	return Config{
		Listeners: Listeners{Memcache: "127.0.0.1:11211", REST: "127.0.0.1:4406", GRPC: "127.0.0.1:5406"},
		Memcache:  Memcache{SocketMode: "0700"},
		NDB:       NDB{PoolSize: 2},
		Embedded: Embedded{Partitions: 16, Nodes: 1, ReapInterval: Duration(time.Second),
			Fsync: "everysec", SnapshotInterval: Duration(time.Hour), SnapshotLogSize: 64 << 20},
		Limits: Limits{ItemSizeMax: 1 << 20, MaxConnections: 4096, MaxPendingPerConn: 1024},
		API:    API{Limits: APILimits{MaxBatch: 256, MaxBody: 4 << 20, MaxFilters: 64, MaxColumns: 256, MaxIdentifier: 64, MaxMultiGet: 256}},
		Log:    Log{Level: "info", Format: "text"},
	}
}

// LoadFile merges a YAML file over c. Unknown keys are an error, so a typo does
// not silently fall back to a default.
func (c *Config) LoadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) { // io.EOF: empty file
		return fmt.Errorf("config file %s: %w", path, err)
	}
	if len(c.Extra) > 0 {
		keys := make([]string, 0, len(c.Extra))
		for k := range c.Extra {
			keys = append(keys, k)
		}
		return fmt.Errorf("config file %s: unknown top-level keys %v (known: listeners, memcache, ndb, embedded, dispatch, tables, api, containers, key_prefixes, limits, log)", path, keys)
	}
	return nil
}

// envVars maps NDBGATE_* variables onto setters.
var envVars = []struct {
	name string
	set  func(c *Config, v string) error
}{
	{"NDBGATE_MEMCACHE", func(c *Config, v string) error { c.Listeners.Memcache = v; return nil }},
	{"NDBGATE_REST", func(c *Config, v string) error { c.Listeners.REST = v; return nil }},
	{"NDBGATE_GRPC", func(c *Config, v string) error { c.Listeners.GRPC = v; return nil }},
	{"NDBGATE_MEMCACHE_SOCKET", func(c *Config, v string) error { c.Memcache.Socket = v; return nil }},
	{"NDBGATE_MEMCACHE_TLS", func(c *Config, v string) error { c.Memcache.TLS.Listen = v; return nil }},
	{"NDBGATE_MEMCACHE_EVENT_LOOP", func(c *Config, v string) error { c.Memcache.EventLoop = v; return nil }},
	{"NDBGATE_MEMCACHE_IO_URING", func(c *Config, v string) error { return setBool(&c.Memcache.IOUring, v) }},
	{"NDBGATE_MEMCACHE_SASL_CREDENTIALS", func(c *Config, v string) error { c.Memcache.SASLCredentialsFile = v; return nil }},
	{"NDBGATE_API_KEYS", func(c *Config, v string) error { c.API.KeysFile = v; return nil }},
	{"NDBGATE_NDB_CONNECTSTRING", func(c *Config, v string) error { c.NDB.Connectstring = v; return nil }},
	{"NDBGATE_NDB_POOL_SIZE", func(c *Config, v string) error { return setInt(&c.NDB.PoolSize, v) }},
	{"NDBGATE_ITEM_SIZE_MAX", func(c *Config, v string) error { return c.Limits.ItemSizeMax.Set(v) }},
	{"NDBGATE_MEMORY_LIMIT", func(c *Config, v string) error { return c.Embedded.MemoryLimit.Set(v) }},
	{"NDBGATE_PARTITIONS", func(c *Config, v string) error { return setInt(&c.Embedded.Partitions, v) }},
	{"NDBGATE_NODES", func(c *Config, v string) error { return setInt(&c.Embedded.Nodes, v) }},
	{"NDBGATE_DATA_DIR", func(c *Config, v string) error { c.Embedded.DataDir = v; return nil }},
	{"NDBGATE_FSYNC", func(c *Config, v string) error { c.Embedded.Fsync = v; return nil }},
	{"NDBGATE_SNAPSHOT_INTERVAL", func(c *Config, v string) error { return c.Embedded.SnapshotInterval.Set(v) }},
	{"NDBGATE_SNAPSHOT_LOG_SIZE", func(c *Config, v string) error { return c.Embedded.SnapshotLogSize.Set(v) }},
	{"NDBGATE_MAX_CONNECTIONS", func(c *Config, v string) error { return setInt(&c.Limits.MaxConnections, v) }},
	{"NDBGATE_LOG_LEVEL", func(c *Config, v string) error { c.Log.Level = v; return nil }},
	{"NDBGATE_LOG_FORMAT", func(c *Config, v string) error { c.Log.Format = v; return nil }},
}

// EnvNames lists the environment variables read, for the README and --help.
func EnvNames() []string {
	out := make([]string, len(envVars))
	for i, e := range envVars {
		out[i] = e.name
	}
	return out
}

// ApplyEnv merges NDBGATE_* variables from lookup (os.LookupEnv in production).
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) error {
	for _, e := range envVars {
		if v, ok := lookup(e.name); ok {
			if err := e.set(c, v); err != nil {
				return fmt.Errorf("environment %s=%q: %w", e.name, v, err)
			}
		}
	}
	return nil
}

// SocketFileMode parses SocketMode (octal, e.g. 0700).
func (m Memcache) SocketFileMode() (os.FileMode, error) {
	if m.SocketMode == "" {
		return 0o700, nil
	}
	n, err := strconv.ParseUint(m.SocketMode, 8, 32)
	if err != nil || n > 0o777 {
		return 0, fmt.Errorf("want octal permissions such as 0700 or 0660")
	}
	return os.FileMode(n), nil
}

func setInt(dst *int, v string) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("want a whole number")
	}
	*dst = n
	return nil
}

func setBool(dst **bool, v string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	*dst = &b
	return nil
}

// Validate checks everything a user can get wrong and says what to fix.
func (c *Config) Validate() error {
	var errs []error
	for _, l := range []struct{ name, addr string }{
		{"listeners.memcache (--memcache)", c.Listeners.Memcache},
		{"listeners.rest (--rest)", c.Listeners.REST},
		{"listeners.grpc (--grpc)", c.Listeners.GRPC},
		{"memcache.tls.listen (--memcache-tls)", c.Memcache.TLS.Listen},
	} {
		if l.addr == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(l.addr); err != nil {
			errs = append(errs, fmt.Errorf("%s = %q is not host:port (e.g. 127.0.0.1:11211; empty turns it off)", l.name, l.addr))
		} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			errs = append(errs, fmt.Errorf("%s = %q has a bad port", l.name, l.addr))
		}
	}
	if _, err := c.Memcache.SocketFileMode(); err != nil {
		errs = append(errs, fmt.Errorf("memcache.socket_mode (--memcache-socket-mode) = %q: %v", c.Memcache.SocketMode, err))
	}
	switch c.Memcache.EventLoop {
	case "", "gnet":
	case "epoll":
		if runtime.GOOS != "linux" {
			errs = append(errs, fmt.Errorf("memcache.event_loop (--memcache-event-loop) = \"epoll\" is Linux only; use \"gnet\" or leave it empty"))
		}
	default:
		errs = append(errs, fmt.Errorf("memcache.event_loop (--memcache-event-loop) = %q: must be \"epoll\" (Linux), \"gnet\", or empty for the platform's default", c.Memcache.EventLoop))
	}
	if t := c.Memcache.TLS; t.Listen != "" && (t.CertFile == "" || t.KeyFile == "") {
		errs = append(errs, fmt.Errorf("memcache.tls.listen (--memcache-tls) = %q needs memcache.tls.cert_file and key_file (--tls-cert, --tls-key)", t.Listen))
	}
	if c.Limits.ItemSizeMax < 1024 || c.Limits.ItemSizeMax > 1<<30 {
		errs = append(errs, fmt.Errorf("limits.item_size_max (--item-size-max) = %d: must be between 1k and 1g, as memcached's -I", c.Limits.ItemSizeMax))
	}
	if c.Embedded.MemoryLimit != 0 && c.Embedded.MemoryLimit < 1<<20 {
		errs = append(errs, fmt.Errorf("embedded.memory_limit (--memory-limit) = %d: use 0 for no limit or at least 1m", c.Embedded.MemoryLimit))
	}
	if d := c.Dispatch; d.RoundSize < 0 || d.RoundSize > 1024 || d.RoundsPerNode < 0 || d.MaxInFlight < 0 || d.MaxRetries < 0 {
		errs = append(errs, fmt.Errorf("dispatch: round_size must be 0..1024 (0 = default 128); rounds_per_node, max_inflight_ops and max_retries must not be negative"))
	}
	if c.Embedded.SimulatedRoundTrip < 0 || c.Embedded.SimulatedRoundTrip > Duration(time.Second) {
		errs = append(errs, fmt.Errorf("embedded.simulated_round_trip (--simulated-round-trip) = %v: must be 0..1s", time.Duration(c.Embedded.SimulatedRoundTrip)))
	}
	if c.Embedded.Partitions < 1 || c.Embedded.Partitions > 4096 {
		errs = append(errs, fmt.Errorf("embedded.partitions = %d: must be 1..4096", c.Embedded.Partitions))
	}
	if c.Embedded.Nodes < 1 || c.Embedded.Nodes > c.Embedded.Partitions {
		errs = append(errs, fmt.Errorf("embedded.nodes = %d: must be 1..partitions (%d)", c.Embedded.Nodes, c.Embedded.Partitions))
	}
	switch c.Embedded.Fsync {
	case "always", "everysec", "no":
	default:
		errs = append(errs, fmt.Errorf("embedded.fsync (--fsync) = %q: use always, everysec or no", c.Embedded.Fsync))
	}
	if c.Embedded.SnapshotInterval < 0 {
		errs = append(errs, fmt.Errorf("embedded.snapshot_interval (--snapshot-interval) = %v: use 0 for none or a positive duration such as 1h", time.Duration(c.Embedded.SnapshotInterval)))
	}
	if n := c.Embedded.SnapshotLogSize; n != 0 && n < 1<<20 {
		errs = append(errs, fmt.Errorf("embedded.snapshot_log_size (--snapshot-log-size) = %d: use 0 for none or at least 1m", n))
	}
	if c.Embedded.DataDir != "" && c.NDB.Connectstring != "" {
		errs = append(errs, fmt.Errorf("embedded.data_dir (--data-dir) is for the embedded engine; with ndb.connectstring the cluster keeps the data: drop one of them"))
	}
	if c.NDB.PoolSize < 1 || c.NDB.PoolSize > 64 {
		errs = append(errs, fmt.Errorf("ndb.pool_size (--ndb-pool-size) = %d: must be 1..64", c.NDB.PoolSize))
	}
	if c.Limits.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("limits.max_connections = %d: must be at least 1", c.Limits.MaxConnections))
	}
	if c.Limits.MaxPendingPerConn < 1 {
		errs = append(errs, fmt.Errorf("limits.max_pending_per_conn = %d: must be at least 1", c.Limits.MaxPendingPerConn))
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log.level (--log-level) = %q: use debug, info, warn or error", c.Log.Level))
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("log.format (--log-format) = %q: use text or json", c.Log.Format))
	}
	if t := c.API.TLS; t.Enabled && (t.CertFile == "" || t.KeyFile == "") {
		errs = append(errs, fmt.Errorf("api.tls.enabled (--api-tls) needs api.tls.cert_file and key_file (--tls-cert, --tls-key)"))
	}
	if l := c.API.Limits; l.MaxBatch < 1 || l.MaxBatch > 4096 || l.MaxBody < 1024 || l.MaxFilters < 1 || l.MaxColumns < 1 ||
		l.MaxIdentifier < 1 || l.MaxIdentifier > 255 || l.MaxMultiGet < 1 || l.MaxMultiGet > 4096 {
		errs = append(errs, fmt.Errorf("api.limits: max_batch and max_multi_get must be 1..4096, max_body at least 1k, max_identifier 1..255, the others at least 1"))
	}
	errs = append(errs, c.validateTables()...)
	names := map[string]bool{}
	for i, ct := range c.Containers {
		where := fmt.Sprintf("containers[%d]", i)
		if ct.Name == "" {
			errs = append(errs, fmt.Errorf("%s: needs a name", where))
		} else if names[ct.Name] {
			errs = append(errs, fmt.Errorf("%s: container name %q is used twice", where, ct.Name))
		}
		names[ct.Name] = true
		if ct.Database == "" || ct.Table == "" {
			errs = append(errs, fmt.Errorf("%s (%s): needs database and table", where, ct.Name))
		}
		if len(ct.KeyColumns) == 0 || len(ct.ValueColumns) == 0 {
			errs = append(errs, fmt.Errorf("%s (%s): needs key_columns and value_columns", where, ct.Name))
		}
	}
	prefixes := map[string]bool{}
	for i, kp := range c.KeyPrefixes {
		where := fmt.Sprintf("key_prefixes[%d] (%q)", i, kp.Prefix)
		if prefixes[kp.Prefix] {
			errs = append(errs, fmt.Errorf("%s: prefix declared twice", where))
		}
		prefixes[kp.Prefix] = true
		if kp.Container != "default" && !names[kp.Container] {
			errs = append(errs, fmt.Errorf("%s: container %q is not declared under containers (or use \"default\")", where, kp.Container))
		}
		switch kp.Policy {
		case "", "ndb-only", "caching", "local-only":
		default:
			errs = append(errs, fmt.Errorf("%s: policy %q: use ndb-only, caching or local-only", where, kp.Policy))
		}
	}
	return errors.Join(errs...)
}

// validateTables checks the declared tables' shape; column types are checked
// when the tables are built (ndbclient.ParseColumnType), with the same names.
func (c *Config) validateTables() []error {
	var errs []error
	seen := map[string]bool{}
	for i, t := range c.Tables {
		where := fmt.Sprintf("tables[%d] (%s.%s)", i, t.Database, t.Name)
		if t.Database == "" || t.Name == "" {
			errs = append(errs, fmt.Errorf("%s: needs database and name", where))
			continue
		}
		if seen[t.Database+"."+t.Name] {
			errs = append(errs, fmt.Errorf("%s: declared twice", where))
		}
		seen[t.Database+"."+t.Name] = true
		cols := map[string]bool{}
		for j, col := range t.Columns {
			if col.Name == "" || col.Type == "" {
				errs = append(errs, fmt.Errorf("%s: columns[%d] needs name and type", where, j))
			}
			if cols[col.Name] {
				errs = append(errs, fmt.Errorf("%s: column %q declared twice", where, col.Name))
			}
			cols[col.Name] = true
		}
		if len(t.Columns) == 0 {
			errs = append(errs, fmt.Errorf("%s: needs columns", where))
		}
		if len(t.PrimaryKey) == 0 {
			errs = append(errs, fmt.Errorf("%s: needs primary_key (a list of column names)", where))
		}
		for _, list := range [][]string{t.PrimaryKey, t.DistributionKey} {
			for _, k := range list {
				if !cols[k] {
					errs = append(errs, fmt.Errorf("%s: key column %q is not among its columns", where, k))
				}
			}
		}
		if t.Partitions < 0 || t.Partitions > 4096 {
			errs = append(errs, fmt.Errorf("%s: partitions must be 0..4096 (0 = embedded.partitions)", where))
		}
	}
	return errs
}
