// Package config is ndbgate's one configuration model, read from a YAML file,
// then NDBGATE_* environment variables, then command-line flags (last wins), and
// validated at start-up with messages that say what to fix. Each setting is
// declared once, in the table of settings.go.
package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is the whole configuration. Its scalar settings are declared in the
// table of settings.go (YAML key, env, flag, default, help, check); the lists
// (tables, containers, key_prefixes) are YAML only and decoded by their tags.
type Config struct {
	Listeners   Listeners
	Memcache    Memcache
	NDB         NDB
	Ndbmemcache Ndbmemcache
	Embedded    Embedded
	Dispatch    Dispatch
	Tables      []Table
	API         API
	Containers  []Container
	KeyPrefixes []KeyPrefix
	Limits      Limits
	Log         Log
}

// Listeners holds one address per front end; an empty address turns it off.
type Listeners struct {
	Memcache, REST, GRPC string
}

// Memcache configures the memcache front end beyond its TCP address.
type Memcache struct {
	Socket     string
	SocketMode string // octal, as memcached -a
	TLS        TLS
	// SASLCredentialsFile, when set, requires SASL PLAIN; only the binary
	// protocol is then served, as under memcached -S.
	SASLCredentialsFile string
	EventLoop           string // "epoll", "gnet", or empty for the platform's
	// IOUring is a pointer so that a Config built without Default still
	// means true (see IOUringOn). Where the kernel refuses io_uring the
	// loops make one syscall per read and write, as when false.
	IOUring *bool
	// BusyPoll is how long an epoll loop polls after a lone turn before it
	// sleeps; 0 is off (transport.Options.BusyPoll). See BusyPollLimit.
	BusyPoll PollLimit
	// HaltPoll is "auto", "on" or "off": whether the other epoll loops poll
	// while one serves a solo client (transport.Options.HaltPoll). See
	// HaltPollOn.
	HaltPoll string
}

// IOUringOn is IOUring with its default (true) applied.
func (m Memcache) IOUringOn() bool { return m.IOUring == nil || *m.IOUring }

// The busy polls' limits under auto, measured with clients and data nodes
// on the same host (bench/RESULTS.md, sessions 36, 40 and 41); the windows
// (internal/pollwindow) shrink to nothing where answers or requests come
// later. With a cluster a one-at-a-time client's next request comes later
// than on the embedded engine (it has slept through the data nodes' round
// trip), so the memcache poll waits longer for it.
const (
	AutoMemcacheBusyPoll        = 50 * time.Microsecond
	AutoMemcacheBusyPollCluster = 100 * time.Microsecond
	AutoNDBBusyPoll             = 200 * time.Microsecond
)

// BusyPollLimit is BusyPoll with auto applied, for a gateway on a cluster
// or on the embedded engine.
func (m Memcache) BusyPollLimit(cluster bool) time.Duration {
	if cluster {
		return m.BusyPoll.Or(AutoMemcacheBusyPollCluster)
	}
	return m.BusyPoll.Or(AutoMemcacheBusyPoll)
}

// AutoHaltPollLoops is the most epoll loops halt_poll's auto turns on
// with: each loop but the solo client's spends a CPU while it polls.
const AutoHaltPollLoops = 2

// HaltPollOn is HaltPoll with auto applied: on for a gateway on a cluster,
// with at most AutoHaltPollLoops loops, on a host where nobody polls before
// an idle vCPU halts (internal/hostidle), where a one-at-a-time client's
// round trip waits for the hypervisor at every wake. Where the host polls
// it only costs (bench/RESULTS.md, session 49).
func (m Memcache) HaltPollOn(cluster bool, loops int, haltsAtOnce bool) bool {
	switch m.HaltPoll {
	case "on":
		return true
	case "off":
		return false
	}
	return cluster && haltsAtOnce && loops <= AutoHaltPollLoops
}

// TLS is the memcache TLS listener. ClientCAFile turns on mutual TLS.
type TLS struct {
	Listen, CertFile, KeyFile, ClientCAFile string
}

// NDB selects a real cluster. An empty connectstring means the embedded engine.
type NDB struct {
	Connectstring string
	PoolSize      int
	// BusyPoll is how long a lone flight polls for the data nodes' answer
	// before it sleeps; 0 is off (ndbapi.Config.BusyPoll). See
	// BusyPollLimit.
	BusyPoll PollLimit
	// FlightWait is how long a flight waits for its answers before it
	// leaves a data node's share to complete later; 0 waits for all
	// (ndbapi.Config.FlightWait).
	FlightWait Duration
}

// BusyPollLimit is BusyPoll with auto applied.
func (n NDB) BusyPollLimit() time.Duration { return n.BusyPoll.Or(AutoNDBBusyPoll) }

// Ndbmemcache serves a server role of ndbmemcache's configuration, read
// from the cluster's ndbmemcache schema, as MySQL Cluster's memcached engine
// did.
type Ndbmemcache struct {
	Role           string
	ReloadInterval Duration
}

// Embedded configures the in-process engine.
type Embedded struct {
	MemoryLimit  ByteSize
	Partitions   int
	Nodes        int
	ReapInterval Duration
	// HugePages puts the rows on 2 MiB transparent huge pages, like
	// memcached's -L: each partition that holds rows takes 2 MiB at once.
	HugePages bool
	// SimulatedRoundTrip delays every flight (backend round trip), as a data
	// node would: for measuring batching on one machine. Benchmarks only.
	SimulatedRoundTrip Duration
	// DataDir keeps the tables and rows there (a log and snapshots), so that
	// they come back after a restart or a crash. Empty: memory only.
	DataDir string
	// Fsync is when the log reaches the disk: always (before a write is
	// acknowledged), everysec or no (the OS decides).
	Fsync string
	// SnapshotInterval: a snapshot this often if anything changed; 0 never.
	SnapshotInterval Duration
	// SnapshotLogSize: a snapshot once the log since the last one is this
	// big and at least as big as that snapshot; 0 never.
	SnapshotLogSize ByteSize
}

// Dispatch tunes the backend dispatcher (ndbclient); zero values mean
// ndbclient's defaults. Coalesce is a pointer: nil means true.
type Dispatch struct {
	RoundSize, FlightsPerNode, MaxInFlight, MaxRetries int
	Coalesce                                           *bool
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
	// AutoIncrement gives the table an auto-increment sequence, as MySQL's
	// AUTO_INCREMENT does: a large_values_table's id draws from it.
	AutoIncrement bool `yaml:"auto_increment"`
}

// API configures the REST and gRPC front ends.
type API struct {
	// KeysFile, when set, requires an API key on every data request; see
	// gateway/auth.
	KeysFile string
	TLS      APITLS // when Enabled, REST and gRPC are served over TLS only
	Limits   APILimits
}

// APITLS is TLS for the REST and gRPC listeners.
type APITLS struct {
	Enabled                         bool
	CertFile, KeyFile, ClientCAFile string
}

// APILimits bound what one REST or gRPC request may ask for.
type APILimits struct {
	MaxBatch, MaxFilters, MaxColumns, MaxIdentifier, MaxMultiGet int
	MaxBody                                                      ByteSize
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
	// LargeValuesTable ("schema.table") keeps values longer than the value
	// column in parts there, as ndbmemcache's large_values_table does: the
	// table needs ext_id and ext_size columns.
	LargeValuesTable string `yaml:"large_values_table"`
}

// KeyPrefix routes keys starting with Prefix to a container under a policy.
type KeyPrefix struct {
	Prefix    string `yaml:"prefix"`
	Container string `yaml:"container"`
	Policy    string `yaml:"policy"` // ndb-only (default), caching, local-only
}

// Limits bound what memcache clients may send.
type Limits struct {
	ItemSizeMax       ByteSize
	MaxConnections    int
	MaxPendingPerConn int // past it the connection is not read until replies go out
	// MaxPendingKeysPerConn bounds the keys of those commands: a run of
	// pipelined gets is one queued command of many keys.
	MaxPendingKeysPerConn int
}

// Log configures log/slog.
type Log struct {
	Level, Format string
}

// Default returns the configuration used when nothing is set: the table's
// defaults.
func Default() Config {
	var c Config
	for _, s := range settings {
		if err := parse(s.Field(&c), s.Default); err != nil {
			panic(fmt.Sprintf("config: default of %s: %v", s.Key, err))
		}
	}
	return c
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

// Validate checks everything a user can get wrong and says what to fix: each
// setting's own check from the table, then what spans settings and lists.
func (c *Config) Validate() error {
	var errs []error
	for _, s := range settings {
		if s.Check == nil {
			continue
		}
		p := s.Field(c)
		if err := s.Check(value(p)); err != nil {
			errs = append(errs, fmt.Errorf("%s = %s: %w", nameOf(s.Key), show(p), err))
		}
	}
	if c.Embedded.Nodes < 1 || c.Embedded.Nodes > c.Embedded.Partitions {
		errs = append(errs, fmt.Errorf("%s = %d: must be 1..partitions (%d)", nameOf("embedded.nodes"), c.Embedded.Nodes, c.Embedded.Partitions))
	}
	if t := c.Memcache.TLS; t.Listen != "" && (t.CertFile == "" || t.KeyFile == "") {
		errs = append(errs, fmt.Errorf("%s = %q needs memcache.tls.cert_file and key_file (--tls-cert, --tls-key)", nameOf("memcache.tls.listen"), t.Listen))
	}
	if t := c.API.TLS; t.Enabled && (t.CertFile == "" || t.KeyFile == "") {
		errs = append(errs, fmt.Errorf("%s needs api.tls.cert_file and key_file (--tls-cert, --tls-key)", nameOf("api.tls.enabled")))
	}
	if c.Memcache.BusyPoll > 0 && c.Memcache.EventLoop == "gnet" {
		errs = append(errs, fmt.Errorf("%s = %s polls in the epoll loops only: drop it, or use memcache.event_loop epoll", nameOf("memcache.busy_poll"), c.Memcache.BusyPoll))
	}
	if c.Memcache.HaltPoll == "on" && c.Memcache.EventLoop == "gnet" {
		errs = append(errs, fmt.Errorf("%s = on polls in the epoll loops only: drop it, or use memcache.event_loop epoll", nameOf("memcache.halt_poll")))
	}
	if c.Memcache.HaltPoll == "on" && c.Memcache.BusyPoll == 0 {
		errs = append(errs, fmt.Errorf("%s = on keeps the loops awake for clients that memcache.busy_poll finds, and it is 0: drop halt_poll, or set busy_poll", nameOf("memcache.halt_poll")))
	}
	if c.NDB.BusyPoll > 0 && c.NDB.Connectstring == "" {
		errs = append(errs, fmt.Errorf("%s = %s polls for a cluster's answers: set ndb.connectstring, or drop it", nameOf("ndb.busy_poll"), c.NDB.BusyPoll))
	}
	if c.Embedded.DataDir != "" && c.NDB.Connectstring != "" {
		errs = append(errs, fmt.Errorf("%s is for the embedded engine; with ndb.connectstring the cluster keeps the data: drop one of them", nameOf("embedded.data_dir")))
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
		if lv := ct.LargeValuesTable; lv != "" {
			if db, t, ok := strings.Cut(lv, "."); !ok || db == "" || t == "" {
				errs = append(errs, fmt.Errorf("%s (%s): large_values_table %q: name it schema.table", where, ct.Name, lv))
			}
			if len(ct.ValueColumns) != 1 || ct.CasColumn == "" {
				errs = append(errs, fmt.Errorf("%s (%s): large_values_table needs one value column and a cas_column", where, ct.Name))
			}
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
