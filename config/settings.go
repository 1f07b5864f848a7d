package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// A setting is one scalar value of the configuration. The table below is the
// only place a setting's names, default and help are written: YAML decoding,
// the environment, flags, --help, Default and Validate all walk it, and a test
// holds README's configuration table to it.
type setting struct {
	Key     string // YAML path, dotted
	Env     string // NDBGATE_* variable; "" for none
	Flag    string // flag name without dashes; "" for none. Settings may share one
	Default string // as written in YAML; "" is empty (or zero)
	Help    string
	Field   func(*Config) any // the value's address in a Config
	Check   func(v any) error // nil, or what is wrong with the value
	// Old are the setting's earlier names, each form still accepted as a
	// deprecated alias of the same form above ("" for none). One source
	// (the file, the environment or the flags) giving both names with
	// different values is an error; across sources the last still wins.
	Old names
}

// names are a setting's names in the three sources.
type names struct{ Key, Env, Flag string }

// One flag sets the memcache and the REST/gRPC TLS files alike; settings
// that share a flag share its help.
const (
	tlsCertHelp     = "TLS certificate file (PEM): memcache's TLS listener, and REST/gRPC with --api-tls"
	tlsKeyHelp      = "TLS private key file (PEM): memcache's TLS listener, and REST/gRPC with --api-tls"
	tlsClientCAHelp = "require client certificates signed by these CAs (PEM), mutual TLS: memcache's TLS listener, and REST/gRPC"
)

// configEnv and configFlag name the YAML file; they are not settings of it.
const (
	configEnv  = "NDBGATE_CONFIG"
	configFlag = "config"
)

var settings = []setting{
	{Key: "listeners.memcache", Env: "NDBGATE_MEMCACHE", Flag: "memcache", Default: "127.0.0.1:11211",
		Help: "memcache listener host:port; empty turns it off", Check: hostPort,
		Field: func(c *Config) any { return &c.Listeners.Memcache }},
	{Key: "listeners.rest", Env: "NDBGATE_REST", Flag: "rest", Default: "127.0.0.1:4406",
		Help: "HTTP listener (REST APIs, metrics, health) host:port; empty turns it off", Check: hostPort,
		Field: func(c *Config) any { return &c.Listeners.REST }},
	{Key: "listeners.grpc", Env: "NDBGATE_GRPC", Flag: "grpc", Default: "127.0.0.1:5406",
		Help: "gRPC listener host:port; empty turns it off", Check: hostPort,
		Field: func(c *Config) any { return &c.Listeners.GRPC }},

	{Key: "memcache.socket", Env: "NDBGATE_MEMCACHE_SOCKET", Flag: "memcache-socket",
		Help:  "memcache: also serve this unix-socket path (memcached -s)",
		Field: func(c *Config) any { return &c.Memcache.Socket }},
	{Key: "memcache.socket_mode", Flag: "memcache-socket-mode", Default: "0700",
		Help: "memcache: unix-socket permissions, octal (memcached -a)", Check: octalMode,
		Field: func(c *Config) any { return &c.Memcache.SocketMode }},
	{Key: "memcache.event_loop", Env: "NDBGATE_MEMCACHE_EVENT_LOOP", Flag: "memcache-event-loop",
		Help: "memcache: event loop for TCP and unix sockets, epoll (Linux only) or gnet; empty picks epoll on Linux, else gnet", Check: eventLoop,
		Field: func(c *Config) any { return &c.Memcache.EventLoop }},
	{Key: "memcache.io_uring", Env: "NDBGATE_MEMCACHE_IO_URING", Flag: "memcache-io-uring", Default: "true",
		Help:  "memcache: epoll loops batch each turn's reads and replies into one io_uring_enter where the kernel allows it",
		Field: func(c *Config) any { return &c.Memcache.IOUring }},
	{Key: "memcache.busy_poll", Env: "NDBGATE_MEMCACHE_BUSY_POLL", Flag: "memcache-busy-poll", Default: "auto",
		Help:  "memcache: after two turns in a row that each served the same connection's request and nothing else (a client sending one request at a time, alone on its loop), an epoll loop polls up to this long before it sleeps, so that the next request finds it awake: lower latency and more requests a second for such a client, for more CPU a request, as Linux's net.core.busy_poll; the poll's length adapts, growing while requests come within this limit and shrinking to 0 while they come later; auto = 50us, 100us with a cluster (gnet's loops never poll); 0 = off",
		Check: pollLimit,
		Field: func(c *Config) any { return &c.Memcache.BusyPoll }},
	{Key: "memcache.halt_poll", Env: "NDBGATE_MEMCACHE_HALT_POLL", Flag: "memcache-halt-poll", Default: "auto",
		Help:  "memcache: while one epoll loop serves a client sending one request at a time (memcache.busy_poll's solo client), the other loops poll instead of sleeping, so that their CPUs never halt: on a KVM guest where nobody polls before an idle vCPU halts (its haltpoll cpuidle driver in use, which turns the host's polling off, with guest_halt_poll_ns 0), each thread the request wakes (the NDB executor, the data nodes, the client) then runs at once instead of waiting for the hypervisor; costs a CPU per other loop while such a client is served, and where the host polls it only costs; auto = on with a cluster, at most 2 loops, on such a guest; on; off",
		Check: oneOf("use auto, on or off", "auto", "on", "off"),
		Field: func(c *Config) any { return &c.Memcache.HaltPoll }},
	{Key: "memcache.tls.listen", Env: "NDBGATE_MEMCACHE_TLS", Flag: "memcache-tls",
		Help: "memcache: also serve TLS on host:port (needs --tls-cert and --tls-key)", Check: hostPort,
		Field: func(c *Config) any { return &c.Memcache.TLS.Listen }},
	{Key: "memcache.tls.cert_file", Flag: "tls-cert",
		Help:  tlsCertHelp,
		Field: func(c *Config) any { return &c.Memcache.TLS.CertFile }},
	{Key: "memcache.tls.key_file", Flag: "tls-key",
		Help:  tlsKeyHelp,
		Field: func(c *Config) any { return &c.Memcache.TLS.KeyFile }},
	{Key: "memcache.tls.client_ca_file", Flag: "tls-client-ca",
		Help:  tlsClientCAHelp,
		Field: func(c *Config) any { return &c.Memcache.TLS.ClientCAFile }},
	{Key: "memcache.sasl_credentials_file", Env: "NDBGATE_MEMCACHE_SASL_CREDENTIALS", Flag: "memcache-sasl-credentials",
		Help:  "memcache: require SASL PLAIN with the user:password lines of this file (binary protocol only, as memcached -S)",
		Field: func(c *Config) any { return &c.Memcache.SASLCredentialsFile }},

	{Key: "ndb.connectstring", Env: "NDBGATE_NDB_CONNECTSTRING", Flag: "ndb-connectstring",
		Help:  "NDB management server(s), host:1186[,host2:1186]; empty = embedded engine",
		Field: func(c *Config) any { return &c.NDB.Connectstring }},
	{Key: "ndb.pool_size", Env: "NDBGATE_NDB_POOL_SIZE", Flag: "ndb-pool-size", Default: "2",
		Help: "NDB cluster connections in the pool", Check: within(1, 64, "must be 1..64"),
		Field: func(c *Config) any { return &c.NDB.PoolSize }},
	{Key: "ndb.busy_poll", Env: "NDBGATE_NDB_BUSY_POLL", Flag: "ndb-busy-poll", Default: "auto",
		Help:  "NDB: a lone request (the only work of its epoll loop, run on the loop's thread) polls the cluster's sockets up to this long for the data nodes' answer before it sleeps: lower latency for a client that sends one request at a time, for more CPU; with memcache.busy_poll, neither wake-up of a one-at-a-time request is paid; the poll's length adapts, growing while answers come within this limit and shrinking to 0 while they come later, as from data nodes farther away; auto = 200us with a cluster; 0 = off",
		Check: pollLimit,
		Field: func(c *Config) any { return &c.NDB.BusyPoll }},
	{Key: "ndb.flight_wait", Env: "NDBGATE_NDB_FLIGHT_WAIT", Flag: "ndb-flight-wait", Default: "10ms",
		Help:  "NDB: a round trip waits this long for the data nodes' answers; a node's share not answered by then completes when the node answers, and the rest of the round trip's requests complete at once, so a data node that stops answering holds up only the requests with keys on it; 0 = wait for every answer",
		Check: within(0, Duration(10*time.Second), "must be 0..10s"),
		Field: func(c *Config) any { return &c.NDB.FlightWait }},

	{Key: "ndbmemcache.role", Env: "NDBGATE_NDBMEMCACHE_ROLE", Flag: "ndbmemcache-role",
		Help:  "serve this server role of ndbmemcache's configuration (the ndbmemcache schema in the cluster): its key prefixes, containers and policies; YAML key_prefixes and containers of the same name win over it",
		Field: func(c *Config) any { return &c.Ndbmemcache.Role }},
	{Key: "ndbmemcache.reload_interval", Env: "NDBGATE_NDBMEMCACHE_RELOAD_INTERVAL", Flag: "ndbmemcache-reload-interval", Default: "1s",
		Help:  "how often the role's update_timestamp is read; a change reloads the configuration without dropping a connection; 0 = never",
		Check: within(0, Duration(time.Hour), "must be 0..1h"),
		Field: func(c *Config) any { return &c.Ndbmemcache.ReloadInterval }},

	{Key: "embedded.memory_limit", Env: "NDBGATE_MEMORY_LIMIT", Flag: "memory-limit", Default: "0",
		Help: "embedded engine memory limit, e.g. 512m; 0 = none (memcached -m)", Check: memoryLimit,
		Field: func(c *Config) any { return &c.Embedded.MemoryLimit }},
	{Key: "embedded.partitions", Env: "NDBGATE_PARTITIONS", Flag: "partitions", Default: "16",
		Help: "embedded engine: partitions per table", Check: within(1, 4096, "must be 1..4096"),
		Field: func(c *Config) any { return &c.Embedded.Partitions }},
	{Key: "embedded.nodes", Env: "NDBGATE_NODES", Flag: "nodes", Default: "1",
		Help:  "embedded engine: simulated data nodes, 1..partitions",
		Field: func(c *Config) any { return &c.Embedded.Nodes }},
	{Key: "embedded.huge_pages", Env: "NDBGATE_EMBEDDED_HUGE_PAGES", Flag: "embedded-huge-pages", Default: "false",
		Help:  "embedded engine: map the rows' pages as 2 MiB transparent huge pages (MADV_HUGEPAGE), like memcached -L: fewer TLB misses per lookup, for 2 MiB of memory at a time per partition that holds rows",
		Field: func(c *Config) any { return &c.Embedded.HugePages }},
	{Key: "embedded.reap_interval", Default: "1s",
		Help:  "embedded engine: how often expired rows are freed",
		Field: func(c *Config) any { return &c.Embedded.ReapInterval }},
	{Key: "embedded.simulated_round_trip", Flag: "simulated-round-trip", Default: "0",
		Help:  "embedded engine, benchmarks only: delay every backend round trip by this much (e.g. 100us)",
		Check: within(0, Duration(time.Second), "must be 0..1s"),
		Field: func(c *Config) any { return &c.Embedded.SimulatedRoundTrip }},
	{Key: "embedded.data_dir", Env: "NDBGATE_DATA_DIR", Flag: "data-dir",
		Help:  "embedded engine: keep tables and rows in this directory (a log and snapshots), so they survive restarts and crashes; empty = memory only",
		Field: func(c *Config) any { return &c.Embedded.DataDir }},
	{Key: "embedded.fsync", Env: "NDBGATE_FSYNC", Flag: "fsync", Default: "everysec",
		Help: "with --data-dir: always (a write is acknowledged once on disk), everysec or no", Check: oneOf("use always, everysec or no", "always", "everysec", "no"),
		Field: func(c *Config) any { return &c.Embedded.Fsync }},
	{Key: "embedded.snapshot_interval", Env: "NDBGATE_SNAPSHOT_INTERVAL", Flag: "snapshot-interval", Default: "1h",
		Help:  "with --data-dir: snapshot this often if anything changed, e.g. 30m; 0 = never",
		Check: within(0, Duration(math.MaxInt64), "use 0 for none or a positive duration such as 1h"),
		Field: func(c *Config) any { return &c.Embedded.SnapshotInterval }},
	{Key: "embedded.snapshot_log_size", Env: "NDBGATE_SNAPSHOT_LOG_SIZE", Flag: "snapshot-log-size", Default: "64m",
		Help:  "with --data-dir: snapshot once the log since the last one is this big (and at least the snapshot's size), e.g. 64m; 0 = never",
		Check: snapshotLogSize,
		Field: func(c *Config) any { return &c.Embedded.SnapshotLogSize }},

	{Key: "dispatch.round_size", Default: "256",
		Help: "most operations per round (a request's share for one data node) and per flight (0 = 256)", Check: within(0, 1024, "must be 0..1024 (0 = default 256)"),
		Field: func(c *Config) any { return &c.Dispatch.RoundSize }},
	{Key: "dispatch.coalesce", Default: "true",
		Help:  "rounds queued for a data node leave together in one flight (one backend round trip)",
		Field: func(c *Config) any { return &c.Dispatch.Coalesce }},
	{Key: "dispatch.flights_per_node", Default: "1",
		Help: "flights (backend round trips) at once per data node (0 = 1)", Check: notNegative,
		Field: func(c *Config) any { return &c.Dispatch.FlightsPerNode },
		Old:   names{Key: "dispatch.rounds_per_node"}},
	{Key: "dispatch.max_inflight_ops", Default: "65536",
		Help: "operations admitted at once; past it requests fail fast as overloaded (0 = 65536)", Check: notNegative,
		Field: func(c *Config) any { return &c.Dispatch.MaxInFlight }},
	{Key: "dispatch.max_retries", Default: "3",
		Help: "retries of Temporary backend errors (0 = 3)", Check: notNegative,
		Field: func(c *Config) any { return &c.Dispatch.MaxRetries }},

	{Key: "api.keys_file", Env: "NDBGATE_API_KEYS", Flag: "api-keys",
		Help:  "REST/gRPC: require API keys from this YAML file (header X-API-KEY)",
		Field: func(c *Config) any { return &c.API.KeysFile }},
	{Key: "api.tls.enabled", Flag: "api-tls", Default: "false",
		Help:  "REST/gRPC: serve TLS only, with --tls-cert/--tls-key (mutual TLS with --tls-client-ca)",
		Field: func(c *Config) any { return &c.API.TLS.Enabled }},
	{Key: "api.tls.cert_file", Flag: "tls-cert",
		Help:  tlsCertHelp,
		Field: func(c *Config) any { return &c.API.TLS.CertFile }},
	{Key: "api.tls.key_file", Flag: "tls-key",
		Help:  tlsKeyHelp,
		Field: func(c *Config) any { return &c.API.TLS.KeyFile }},
	{Key: "api.tls.client_ca_file", Flag: "tls-client-ca",
		Help:  tlsClientCAHelp,
		Field: func(c *Config) any { return &c.API.TLS.ClientCAFile }},
	{Key: "api.limits.max_batch", Default: "256",
		Help: "operations in one batch", Check: within(1, 4096, "must be 1..4096"),
		Field: func(c *Config) any { return &c.API.Limits.MaxBatch }},
	{Key: "api.limits.max_body", Default: "4m",
		Help: "largest REST request body and gRPC message", Check: within(1<<10, ^ByteSize(0), "must be at least 1k"),
		Field: func(c *Config) any { return &c.API.Limits.MaxBody }},
	{Key: "api.limits.max_filters", Default: "64",
		Help: "filters of one pk-read", Check: atLeastOne,
		Field: func(c *Config) any { return &c.API.Limits.MaxFilters }},
	{Key: "api.limits.max_columns", Default: "256",
		Help: "read columns of one pk-read", Check: atLeastOne,
		Field: func(c *Config) any { return &c.API.Limits.MaxColumns }},
	{Key: "api.limits.max_identifier", Default: "64",
		Help: "length of a database, table or column name", Check: within(1, 255, "must be 1..255"),
		Field: func(c *Config) any { return &c.API.Limits.MaxIdentifier }},
	{Key: "api.limits.max_multi_get", Default: "256",
		Help: "keys of one KV multi-get", Check: within(1, 4096, "must be 1..4096"),
		Field: func(c *Config) any { return &c.API.Limits.MaxMultiGet }},

	{Key: "limits.item_size_max", Env: "NDBGATE_ITEM_SIZE_MAX", Flag: "item-size-max", Default: "1m",
		Help:  "largest value, e.g. 1m (memcached -I)",
		Check: within[ByteSize](1<<10, 1<<30, "must be between 1k and 1g, as memcached's -I"),
		Field: func(c *Config) any { return &c.Limits.ItemSizeMax }},
	{Key: "limits.max_connections", Env: "NDBGATE_MAX_CONNECTIONS", Flag: "max-connections", Default: "4096",
		Help: "memcache: most open connections (memcached -c)", Check: atLeastOne,
		Field: func(c *Config) any { return &c.Limits.MaxConnections }},
	{Key: "limits.max_pending_per_conn", Default: "1024",
		Help: "memcache: commands of one connection awaiting reply before it stops being read", Check: atLeastOne,
		Field: func(c *Config) any { return &c.Limits.MaxPendingPerConn }},
	{Key: "limits.max_pending_keys_per_conn", Default: "4096",
		Help: "memcache: keys of one connection's commands awaiting reply before it stops being read; while the dispatcher is crowded (1024 operations in flight, or half of dispatch.max_inflight_ops if less), a connection holding 256 keys or more waits too, so that one client's pipeline cannot get the others refused as busy", Check: atLeastOne,
		Field: func(c *Config) any { return &c.Limits.MaxPendingKeysPerConn }},

	{Key: "log.level", Env: "NDBGATE_LOG_LEVEL", Flag: "log-level", Default: "info",
		Help: "debug, info, warn or error", Check: oneOf("use debug, info, warn or error", "debug", "info", "warn", "error"),
		Field: func(c *Config) any { return &c.Log.Level }},
	{Key: "log.format", Env: "NDBGATE_LOG_FORMAT", Flag: "log-format", Default: "text",
		Help: "text or json", Check: oneOf("use text or json", "text", "json"),
		Field: func(c *Config) any { return &c.Log.Format }},
}

// lookupSetting returns the setting of a YAML key, or nil.
func lookupSetting(key string) *setting {
	for i := range settings {
		if settings[i].Key == key {
			return &settings[i]
		}
	}
	return nil
}

// lookupOldKey returns the setting whose deprecated YAML key is key, or nil.
func lookupOldKey(key string) *setting {
	for i := range settings {
		if settings[i].Old.Key != "" && settings[i].Old.Key == key {
			return &settings[i]
		}
	}
	return nil
}

// deprecated is the notice for a setting given by its old name.
func deprecated(old, current string) string {
	return fmt.Sprintf("ndbgate: %s is a deprecated name: use %s", old, current)
}

// bothNames is the error of a source that gives a setting by both its
// names, with different values: neither can be known to be the one meant.
func bothNames(old, current string, oldValue, currentValue any) error {
	return fmt.Errorf("%s and %s name one setting (%s is deprecated), given %v and %v: give one", old, current, old, oldValue, currentValue)
}

// pick is the text one source (a lookup of env or flags) gives s under its
// name or its old one: the old name is noted as deprecated, and the two
// given with different values are an error.
func pick(s *setting, name, old string, lookup func(string) (string, bool), notices *[]string) (string, bool, error) {
	get := func(n string) (string, bool) {
		if n == "" {
			return "", false
		}
		return lookup(n)
	}
	v, ok := get(name)
	ov, oldOK := get(old)
	if !oldOK {
		return v, ok, nil
	}
	*notices = append(*notices, deprecated(old, name))
	if !ok {
		return ov, true, nil
	}
	if v == ov || sameValue(s, v, ov) {
		return v, true, nil
	}
	return "", false, bothNames(old, name, strconv.Quote(ov), strconv.Quote(v))
}

// sameValue reports whether two texts parse to one value of s ("2", " 2").
func sameValue(s *setting, x, y string) bool {
	var a, b Config
	pa, pb := s.Field(&a), s.Field(&b)
	if parse(pa, x) != nil || parse(pb, y) != nil {
		return false
	}
	return value(pa) == value(pb)
}

// nameOf is how messages name a setting: its YAML key and flag.
func nameOf(key string) string {
	s := lookupSetting(key)
	if s == nil {
		panic("config: no setting " + key)
	}
	if s.Flag == "" {
		return s.Key
	}
	return s.Key + " (--" + s.Flag + ")"
}

// parse sets the value at p (a Field) from its text in env or a flag.
func parse(p any, v string) error {
	switch p := p.(type) {
	case *string:
		*p = v
		return nil
	case *int:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return errors.New("want a whole number")
		}
		*p = n
		return nil
	case *bool:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return errors.New("want true or false")
		}
		*p = b
		return nil
	case **bool:
		b := new(bool)
		if err := parse(b, v); err != nil {
			return err
		}
		*p = b
		return nil
	case *ByteSize:
		return p.Set(v)
	case *Duration:
		return p.Set(v)
	case *PollLimit:
		return p.Set(v)
	}
	panic(fmt.Sprintf("config: no parser for %T", p))
}

// typeName is a Field's kind of value, for --help.
func typeName(p any) string {
	switch p.(type) {
	case *int:
		return "int"
	case *bool, **bool:
		return "bool"
	case *ByteSize:
		return "size"
	case *Duration:
		return "duration"
	case *PollLimit:
		return "auto|duration"
	}
	return "string"
}

// value dereferences a Field for checks; a nil *bool is false.
func value(p any) any {
	switch p := p.(type) {
	case *string:
		return *p
	case *int:
		return *p
	case *bool:
		return *p
	case **bool:
		return *p != nil && **p
	case *ByteSize:
		return *p
	case *Duration:
		return *p
	case *PollLimit:
		return *p
	}
	panic(fmt.Sprintf("config: no value for %T", p))
}

// show is a value as validation messages quote it.
func show(p any) string {
	switch v := value(p).(type) {
	case string:
		return strconv.Quote(v)
	case Duration:
		return time.Duration(v).String()
	case PollLimit:
		return v.String()
	default:
		return fmt.Sprint(v)
	}
}

// Checks, each given a setting's value.

func within[T int | ByteSize | Duration](lo, hi T, msg string) func(any) error {
	return func(v any) error {
		if x := v.(T); x < lo || x > hi {
			return errors.New(msg)
		}
		return nil
	}
}

// pollLimit checks a busy poll's limit: auto, or 0..1ms.
func pollLimit(v any) error {
	if p := v.(PollLimit); p != PollAuto && (p < 0 || p > PollLimit(time.Millisecond)) {
		return errors.New("must be auto or 0..1ms (0 = off)")
	}
	return nil
}

var (
	atLeastOne  = within(1, math.MaxInt, "must be at least 1")
	notNegative = within(0, math.MaxInt, "must not be negative (0 = the default)")
)

func oneOf(msg string, allowed ...string) func(any) error {
	return func(v any) error {
		for _, a := range allowed {
			if v.(string) == a {
				return nil
			}
		}
		return errors.New(msg)
	}
}

// hostPort accepts host:port, or empty (off).
func hostPort(v any) error {
	addr := v.(string)
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("not host:port (e.g. 127.0.0.1:11211; empty turns it off)")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return errors.New("has a bad port (0..65535)")
	}
	return nil
}

func octalMode(v any) error {
	_, err := Memcache{SocketMode: v.(string)}.SocketFileMode()
	return err
}

func eventLoop(v any) error {
	switch v.(string) {
	case "", "gnet":
	case "epoll":
		if runtime.GOOS != "linux" {
			return errors.New(`Linux only; use "gnet" or leave it empty`)
		}
	default:
		return errors.New(`must be "epoll" (Linux), "gnet", or empty for the platform's default`)
	}
	return nil
}

func memoryLimit(v any) error {
	if b := v.(ByteSize); b != 0 && b < 1<<20 {
		return errors.New("use 0 for no limit or at least 1m")
	}
	return nil
}

func snapshotLogSize(v any) error {
	if n := v.(ByteSize); n != 0 && n < 1<<20 {
		return errors.New("use 0 for none or at least 1m")
	}
	return nil
}
