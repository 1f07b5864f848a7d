package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, body string) string {
	p := filepath.Join(t.TempDir(), "ndbgate.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestDefaultsAreValid(t *testing.T) {
	c := Default()
	require.NoError(t, c.Validate())
	assert.Equal(t, "127.0.0.1:11211", c.Listeners.Memcache)
	assert.Equal(t, "127.0.0.1:4406", c.Listeners.REST)
	assert.Equal(t, "127.0.0.1:5406", c.Listeners.GRPC)
	assert.Equal(t, ByteSize(1<<20), c.Limits.ItemSizeMax)
}

func TestFileThenEnv(t *testing.T) {
	c := Default()
	require.NoError(t, c.LoadFile(writeFile(t, `
listeners: {memcache: "127.0.0.1:1", rest: ""}
memcache: {io_uring: false}
embedded: {memory_limit: 64m, partitions: 8, reap_interval: 250ms}
limits: {item_size_max: 2m}
containers:
  - {name: s, database: app, table: t, key_columns: [k], value_columns: [v], eviction: false}
key_prefixes:
  - {prefix: "s:", container: s, policy: caching}
`)))
	assert.Equal(t, "127.0.0.1:1", c.Listeners.Memcache)
	assert.Equal(t, "", c.Listeners.REST, "an empty address turns a listener off")
	assert.Equal(t, ByteSize(64<<20), c.Embedded.MemoryLimit)
	assert.Equal(t, Duration(250*time.Millisecond), c.Embedded.ReapInterval)
	require.Len(t, c.Containers, 1)
	require.NotNil(t, c.Containers[0].Eviction)
	assert.False(t, *c.Containers[0].Eviction)
	require.NotNil(t, c.Memcache.IOUring)
	assert.False(t, *c.Memcache.IOUring)

	env := map[string]string{"NDBGATE_MEMCACHE": "127.0.0.1:2", "NDBGATE_ITEM_SIZE_MAX": "4k", "NDBGATE_MEMCACHE_EVENT_LOOP": "gnet", "NDBGATE_MEMCACHE_IO_URING": "true"}
	require.NoError(t, c.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	assert.Equal(t, "127.0.0.1:2", c.Listeners.Memcache, "env overrides the file")
	assert.Equal(t, ByteSize(4096), c.Limits.ItemSizeMax)
	assert.Equal(t, "gnet", c.Memcache.EventLoop)
	assert.True(t, *c.Memcache.IOUring, "env overrides the file")
	assert.Equal(t, 8, c.Embedded.Partitions, "the file's value survives where env is silent")
	require.NoError(t, c.Validate())
}

func TestBadEnvBoolNamesTheVariable(t *testing.T) {
	c := Default()
	err := c.ApplyEnv(func(k string) (string, bool) { return "sometimes", k == "NDBGATE_MEMCACHE_IO_URING" })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NDBGATE_MEMCACHE_IO_URING")
	assert.Contains(t, err.Error(), "want true or false")
}

func TestUnknownKeysAreErrors(t *testing.T) {
	c := Default()
	err := c.LoadFile(writeFile(t, "listners: {memcache: x}\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listners")
	c = Default()
	err = c.LoadFile(writeFile(t, "limits: {item_size: 1m}\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "item_size")
}

func TestEmptyFileIsFine(t *testing.T) {
	c := Default()
	require.NoError(t, c.LoadFile(writeFile(t, "")))
	require.NoError(t, c.Validate())
}

func TestValidationNamesTheSetting(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"bad address", func(c *Config) { c.Listeners.Memcache = "nonsense" }, "listeners.memcache (--memcache)"},
		{"bad port", func(c *Config) { c.Listeners.REST = "127.0.0.1:99999" }, "listeners.rest"},
		{"item size small", func(c *Config) { c.Limits.ItemSizeMax = 12 }, "limits.item_size_max (--item-size-max)"},
		{"memory limit small", func(c *Config) { c.Embedded.MemoryLimit = 1000 }, "embedded.memory_limit"},
		{"partitions", func(c *Config) { c.Embedded.Partitions = 0 }, "embedded.partitions"},
		{"nodes", func(c *Config) { c.Embedded.Nodes = 100 }, "embedded.nodes"},
		{"log level", func(c *Config) { c.Log.Level = "loud" }, "log.level"},
		{"event loop", func(c *Config) { c.Memcache.EventLoop = "libuv" }, `memcache.event_loop (--memcache-event-loop) = "libuv"`},
		{"policy", func(c *Config) { c.KeyPrefixes = []KeyPrefix{{Prefix: "a", Container: "default", Policy: "fast"}} }, `policy "fast"`},
		{"unknown container", func(c *Config) { c.KeyPrefixes = []KeyPrefix{{Prefix: "a", Container: "nope"}} }, `container "nope" is not declared`},
		{"duplicate prefix", func(c *Config) {
			c.KeyPrefixes = []KeyPrefix{{Prefix: "a", Container: "default"}, {Prefix: "a", Container: "default"}}
		}, "prefix declared twice"},
		{"container without columns", func(c *Config) { c.Containers = []Container{{Name: "x", Database: "d", Table: "t"}} }, "needs key_columns and value_columns"},
		{"large values without a schema", func(c *Config) {
			c.Containers = []Container{{Name: "x", Database: "d", Table: "t", KeyColumns: []string{"k"}, ValueColumns: []string{"v"}, CasColumn: "c", LargeValuesTable: "parts"}}
		}, `large_values_table "parts": name it schema.table`},
		{"large values without a cas column", func(c *Config) {
			c.Containers = []Container{{Name: "x", Database: "d", Table: "t", KeyColumns: []string{"k"}, ValueColumns: []string{"v"}, LargeValuesTable: "d.parts"}}
		}, "large_values_table needs one value column and a cas_column"},
		{"fsync", func(c *Config) { c.Embedded.Fsync = "sometimes" }, `embedded.fsync (--fsync) = "sometimes": use always, everysec or no`},
		{"snapshot log size", func(c *Config) { c.Embedded.SnapshotLogSize = 4096 }, "embedded.snapshot_log_size (--snapshot-log-size)"},
		{"snapshot interval", func(c *Config) { c.Embedded.SnapshotInterval = -1 }, "embedded.snapshot_interval"},
		{"busy poll long", func(c *Config) { c.Memcache.BusyPoll = PollLimit(2 * time.Millisecond) }, "memcache.busy_poll (--memcache-busy-poll) = 2ms: must be auto or 0..1ms"},
		{"busy poll on gnet", func(c *Config) { c.Memcache.BusyPoll = PollLimit(50 * time.Microsecond); c.Memcache.EventLoop = "gnet" }, "polls in the epoll loops only"},
		{"ndb busy poll long", func(c *Config) { c.NDB.Connectstring = "mgm:1186"; c.NDB.BusyPoll = PollLimit(2 * time.Millisecond) }, "ndb.busy_poll (--ndb-busy-poll) = 2ms: must be auto or 0..1ms"},
		{"ndb busy poll without a cluster", func(c *Config) { c.NDB.BusyPoll = PollLimit(200 * time.Microsecond) }, "ndb.busy_poll (--ndb-busy-poll) = 200µs polls for a cluster's answers"},
		{"busy poll negative", func(c *Config) { c.NDB.BusyPoll = PollLimit(-2) }, "ndb.busy_poll (--ndb-busy-poll) = -2ns: must be auto or 0..1ms"},
		{"halt poll word", func(c *Config) { c.Memcache.HaltPoll = "always" }, `memcache.halt_poll (--memcache-halt-poll) = "always": use auto, on or off`},
		{"halt poll on gnet", func(c *Config) { c.Memcache.HaltPoll = "on"; c.Memcache.EventLoop = "gnet" }, "memcache.halt_poll (--memcache-halt-poll) = on polls in the epoll loops only"},
		{"halt poll without busy poll", func(c *Config) { c.Memcache.HaltPoll = "on"; c.Memcache.BusyPoll = 0 }, "memcache.busy_poll finds, and it is 0"},
		{"data dir with a cluster", func(c *Config) { c.Embedded.DataDir = "/d"; c.NDB.Connectstring = "mgm:1186" }, "embedded.data_dir (--data-dir) is for the embedded engine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.mutate(&c)
			err := c.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"1048576": 1 << 20, "1m": 1 << 20, "64K": 64 << 10, "2g": 2 << 30, "1MiB": 1 << 20, "512mb": 512 << 20} {
		var b ByteSize
		require.NoError(t, b.Set(in), in)
		assert.Equal(t, want, b, in)
	}
	var b ByteSize
	assert.Error(t, b.Set("lots"))
	assert.Error(t, b.Set("-1"))
}

func TestShippedExampleConfigIsValid(t *testing.T) {
	c := Default()
	require.NoError(t, c.LoadFile("../deploy/examples/ndbgate.yaml"))
	require.NoError(t, c.Validate())
	assert.Len(t, c.Containers, 1)
	assert.Len(t, c.KeyPrefixes, 3)
}

func TestHugePagesSetting(t *testing.T) {
	c := Default()
	assert.False(t, c.Embedded.HugePages, "off unless asked, as memcached's -L")
	require.NoError(t, c.LoadFile(writeFile(t, "embedded: {huge_pages: true}\n")))
	assert.True(t, c.Embedded.HugePages)
	require.NoError(t, c.ApplyEnv(func(k string) (string, bool) { return "false", k == "NDBGATE_EMBEDDED_HUGE_PAGES" }))
	assert.False(t, c.Embedded.HugePages)
}

func TestDataDirSettings(t *testing.T) {
	c := Default()
	assert.Equal(t, "", c.Embedded.DataDir, "memory only unless asked")
	assert.Equal(t, "everysec", c.Embedded.Fsync)
	require.NoError(t, c.LoadFile(writeFile(t, "embedded: {data_dir: /var/lib/ndbgate, fsync: always, snapshot_interval: 5m, snapshot_log_size: 128m}\n")))
	assert.Equal(t, "/var/lib/ndbgate", c.Embedded.DataDir)
	assert.Equal(t, "always", c.Embedded.Fsync)
	assert.Equal(t, Duration(5*time.Minute), c.Embedded.SnapshotInterval)
	assert.Equal(t, ByteSize(128<<20), c.Embedded.SnapshotLogSize)
	env := map[string]string{"NDBGATE_DATA_DIR": "/data", "NDBGATE_FSYNC": "no", "NDBGATE_SNAPSHOT_INTERVAL": "0s", "NDBGATE_SNAPSHOT_LOG_SIZE": "0"}
	require.NoError(t, c.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	assert.Equal(t, "/data", c.Embedded.DataDir)
	assert.Equal(t, "no", c.Embedded.Fsync)
	assert.Zero(t, c.Embedded.SnapshotInterval)
	assert.Zero(t, c.Embedded.SnapshotLogSize)
	require.NoError(t, c.Validate())
}

// halt_poll's auto is on only with a cluster, at most two loops, and a
// host where nobody polls before an idle vCPU halts; on and off are kept
// whatever the host, and each source can set it.
func TestHaltPollAuto(t *testing.T) {
	c := Default()
	assert.Equal(t, "auto", c.Memcache.HaltPoll)
	assert.True(t, c.Memcache.HaltPollOn(true, 2, true))
	assert.False(t, c.Memcache.HaltPollOn(false, 2, true), "the embedded engine")
	assert.False(t, c.Memcache.HaltPollOn(true, AutoHaltPollLoops+1, true), "more loops than auto spends CPUs on")
	assert.False(t, c.Memcache.HaltPollOn(true, 1, false), "a host whose vCPUs poll before they halt, or bare metal")
	require.NoError(t, c.Validate())

	require.NoError(t, c.LoadFile(writeFile(t, "memcache: {halt_poll: 'on'}\n")))
	assert.True(t, c.Memcache.HaltPollOn(false, 8, false))
	require.NoError(t, c.Validate())
	require.NoError(t, c.ApplyEnv(func(k string) (string, bool) { return "off", k == "NDBGATE_MEMCACHE_HALT_POLL" }))
	assert.False(t, c.Memcache.HaltPollOn(true, 2, true))
	require.NoError(t, c.Validate())
}

// The busy polls are auto unless set: on the epoll loops 50us, or 100us
// with a cluster, and on the cluster's side 200us, which gnet and the
// embedded engine simply do not use; an explicit limit is kept, and "auto"
// can be written in each source.
func TestBusyPollsAreAutoUnlessSet(t *testing.T) {
	c := Default()
	assert.Equal(t, PollAuto, c.Memcache.BusyPoll)
	assert.Equal(t, PollAuto, c.NDB.BusyPoll)
	assert.Equal(t, 50*time.Microsecond, c.Memcache.BusyPollLimit(false))
	assert.Equal(t, 100*time.Microsecond, c.Memcache.BusyPollLimit(true))
	assert.Equal(t, 200*time.Microsecond, c.NDB.BusyPollLimit())
	c.Memcache.EventLoop = "gnet"
	require.NoError(t, c.Validate(), "auto on gnet and without a cluster")

	c = Default()
	require.NoError(t, c.LoadFile(writeFile(t, "memcache: {busy_poll: 0s}\nndb: {connectstring: 'mgm:1186', busy_poll: 120us}\n")))
	assert.Zero(t, c.Memcache.BusyPollLimit(true), "0 is off")
	assert.Equal(t, 120*time.Microsecond, c.NDB.BusyPollLimit())
	require.NoError(t, c.ApplyEnv(func(k string) (string, bool) { return "auto", k == "NDBGATE_NDB_BUSY_POLL" }))
	assert.Equal(t, 200*time.Microsecond, c.NDB.BusyPollLimit())
	require.NoError(t, c.LoadFile(writeFile(t, "memcache: {busy_poll: auto}\n")))
	assert.Equal(t, PollAuto, c.Memcache.BusyPoll)
	require.NoError(t, c.Validate())

	err := c.LoadFile(writeFile(t, "memcache: {busy_poll: soon}\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"soon": want auto, or a duration such as 50us or 200us (0 = off)`)
}
