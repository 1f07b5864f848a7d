package config

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// Every scalar field of Config is reached by exactly one setting, so a field
// added without a row in the table is caught here.
func TestTableCoversEveryField(t *testing.T) {
	var c Config
	byAddr := map[uintptr]string{}
	for _, s := range settings {
		addr := reflect.ValueOf(s.Field(&c)).Pointer()
		require.NotContains(t, byAddr, addr, "%s and %s set the same field", s.Key, byAddr[addr])
		byAddr[addr] = s.Key
	}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		case reflect.Slice: // tables, containers, key_prefixes: YAML lists
		default:
			assert.Contains(t, byAddr, v.Addr().Pointer(), "Config%s has no row in the settings table", path)
		}
	}
	walk(reflect.ValueOf(&c).Elem(), "")
}

func TestTableIsWellFormed(t *testing.T) {
	keys, envs := map[string]bool{}, map[string]bool{configEnv: true}
	flagType := map[string]string{configFlag: "string"}
	flagHelp := map[string]string{}
	var c Config
	for _, s := range settings {
		assert.False(t, keys[s.Key], "key %s twice", s.Key)
		keys[s.Key] = true
		assert.NotEmpty(t, s.Help, s.Key)
		if s.Env != "" {
			assert.True(t, strings.HasPrefix(s.Env, "NDBGATE_"), s.Env)
			assert.False(t, envs[s.Env], "env %s twice", s.Env)
			envs[s.Env] = true
		}
		if s.Flag != "" {
			typ := typeName(s.Field(&c))
			if prev, ok := flagType[s.Flag]; ok {
				assert.Equal(t, prev, typ, "--%s sets settings of different types", s.Flag)
			}
			flagType[s.Flag] = typ
			if prev, ok := flagHelp[s.Flag]; ok {
				assert.Equal(t, prev, s.Help, "settings sharing --%s share its help, which --help shows once", s.Flag)
			}
			flagHelp[s.Flag] = s.Help
		}
	}
}

// A flag beats the environment, which beats the file, which beats the
// default; each layer keeps what the later ones leave alone.
func TestLoadPrecedence(t *testing.T) {
	path := writeFile(t, "listeners: {memcache: \"127.0.0.1:1\", rest: \"127.0.0.1:2\", grpc: \"127.0.0.1:3\"}\nembedded: {partitions: 8}\n")
	env := map[string]string{configEnv: path, "NDBGATE_REST": "127.0.0.1:20", "NDBGATE_GRPC": "127.0.0.1:30", "NDBGATE_PARTITIONS": "32"}
	c, err := Load("serve", []string{"--grpc", "127.0.0.1:300", "--partitions=64"}, envOf(env), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:1", c.Listeners.Memcache, "file over default")
	assert.Equal(t, "127.0.0.1:20", c.Listeners.REST, "env over file")
	assert.Equal(t, "127.0.0.1:300", c.Listeners.GRPC, "flag over env")
	assert.Equal(t, 64, c.Embedded.Partitions, "flag over env")
	assert.Equal(t, 1, c.Embedded.Nodes, "default where nothing is set")

	// --config wins over NDBGATE_CONFIG; the last of a repeated flag wins.
	other := writeFile(t, "log: {level: debug}\n")
	c, err = Load("serve", []string{"--config", other, "--memcache", "127.0.0.1:5", "--memcache", "127.0.0.1:6"}, envOf(env), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "debug", c.Log.Level)
	assert.Equal(t, "127.0.0.1:11211", Default().Listeners.Memcache)
	assert.Equal(t, "127.0.0.1:6", c.Listeners.Memcache)
	assert.Equal(t, 32, c.Embedded.Partitions, "env applies with either file")
}

func TestLoadFlags(t *testing.T) {
	// A boolean flag stands alone; one flag may set several settings.
	c, err := Load("serve", []string{"--api-tls", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--memcache-io-uring=false", "--memory-limit", "64m", "--simulated-round-trip", "100us", "--embedded-huge-pages"}, envOf(nil), io.Discard)
	require.NoError(t, err)
	assert.True(t, c.Embedded.HugePages)
	assert.True(t, c.API.TLS.Enabled)
	assert.Equal(t, "c.pem", c.API.TLS.CertFile)
	assert.Equal(t, "c.pem", c.Memcache.TLS.CertFile)
	assert.Equal(t, "k.pem", c.Memcache.TLS.KeyFile)
	assert.False(t, c.Memcache.IOUringOn())
	assert.Equal(t, ByteSize(64<<20), c.Embedded.MemoryLimit)
	assert.Equal(t, Duration(100*time.Microsecond), c.Embedded.SimulatedRoundTrip)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--partitions", "many"}, "-partitions: want a whole number"},
		{[]string{"--item-size-max", "big"}, "-item-size-max: want a size"},
		{[]string{"--memcache-io-uring=maybe"}, "-memcache-io-uring"},
		{[]string{"--bogus"}, "bogus"},
		{[]string{"stray"}, `unexpected argument "stray"`},
		{[]string{"--partitions", "0"}, "embedded.partitions (--partitions) = 0: must be 1..4096"},
	} {
		_, err := Load("serve", tc.args, envOf(nil), io.Discard)
		require.Error(t, err, "%q", tc.args)
		assert.Contains(t, err.Error(), tc.want, "%q", tc.args)
	}
}

func TestHelpIsTheTable(t *testing.T) {
	var out bytes.Buffer
	_, err := Load("serve", []string{"--help"}, envOf(nil), &out)
	require.True(t, errors.Is(err, flag.ErrHelp), "%v", err)
	help := out.String()
	assert.Contains(t, help, "usage: ndbgate serve")
	assert.Contains(t, help, "--config")
	for _, s := range settings {
		assert.Contains(t, help, s.Key)
		assert.Contains(t, help, s.Help)
		if s.Flag != "" {
			assert.Contains(t, help, "  --"+s.Flag)
		}
		if s.Env != "" {
			assert.Contains(t, help, "env "+s.Env)
		}
	}
	assert.Contains(t, help, "yaml memcache.tls.cert_file, api.tls.cert_file", "a shared flag names every setting it sets")
}

func TestEnvParseErrorsNameEveryVariable(t *testing.T) {
	c := Default()
	err := c.ApplyEnv(envOf(map[string]string{"NDBGATE_PARTITIONS": "lots", "NDBGATE_MEMORY_LIMIT": "1z", "NDBGATE_LOG_LEVEL": "debug"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `environment NDBGATE_PARTITIONS="lots": want a whole number`)
	assert.Contains(t, err.Error(), `environment NDBGATE_MEMORY_LIMIT="1z": want a size`)
	assert.Equal(t, "debug", c.Log.Level, "good variables still apply")

	_, err = Load("serve", nil, envOf(map[string]string{"NDBGATE_NDB_POOL_SIZE": "two"}), io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NDBGATE_NDB_POOL_SIZE")
}

func TestYAMLErrorsSayWhere(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"unknown top-level key", "listners: {memcache: x}\n", "line 1: unknown key listners (known here: listeners, memcache"},
		{"unknown nested key", "embedded:\n  memory_limt: 2m\n", "line 2: unknown key embedded.memory_limt (known here: memory_limit, partitions"},
		{"unknown deeper key", "api:\n  tls: {enable: true}\n", "unknown key api.tls.enable"},
		{"a section given a value", "listeners: 127.0.0.1:1\n", "line 1: listeners holds settings (memcache, rest, grpc): want a mapping"},
		{"a bad number", "embedded:\n  partitions: many\n", "embedded.partitions: line 2: cannot unmarshal"},
		{"a bad size", "limits: {item_size_max: huge}\n", "line 1: \"huge\": want a size"},
		{"a bad duration", "embedded: {reap_interval: often}\n", "want a duration"},
		{"unknown key in a list", "key_prefixes:\n  - {prefix: a, container: default, colour: blue}\n", "line 2: field colour not found"},
		{"duplicate key", "log:\n  level: info\n  level: debug\n", `mapping key "level" already defined`},
		{"not a mapping", "- listeners\n", "want a mapping of settings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			err := c.LoadFile(writeFile(t, tc.body))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// Nulls, aliases and merge keys mean what yaml.v3 gave them before.
func TestYAMLAliasesAndMerges(t *testing.T) {
	c := Default()
	require.NoError(t, c.LoadFile(writeFile(t, `
log:
listeners:
  rest: ~
  memcache: &addr 127.0.0.1:7
  grpc: *addr
api:
  limits:
    <<: {max_batch: 8, max_body: 64k}
    max_batch: 9
`)))
	assert.Equal(t, "info", c.Log.Level, "an empty section changes nothing")
	assert.Equal(t, "127.0.0.1:4406", c.Listeners.REST, "a null leaves the default")
	assert.Equal(t, "127.0.0.1:7", c.Listeners.GRPC)
	assert.Equal(t, 9, c.API.Limits.MaxBatch, "a key beats a merged one")
	assert.Equal(t, ByteSize(64<<10), c.API.Limits.MaxBody)
}

func TestEachCheckNamesItsSetting(t *testing.T) {
	for _, tc := range []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.Dispatch.RoundSize = 2000 }, "dispatch.round_size = 2000: must be 0..1024"},
		{func(c *Config) { c.Dispatch.MaxRetries = -1 }, "dispatch.max_retries = -1: must not be negative"},
		{func(c *Config) { c.API.Limits.MaxBody = 10 }, "api.limits.max_body = 10: must be at least 1k"},
		{func(c *Config) { c.API.Limits.MaxIdentifier = 300 }, "api.limits.max_identifier = 300: must be 1..255"},
		{func(c *Config) { c.Embedded.SimulatedRoundTrip = Duration(2 * time.Second) }, "embedded.simulated_round_trip (--simulated-round-trip) = 2s: must be 0..1s"},
		{func(c *Config) { c.Memcache.SocketMode = "999" }, `memcache.socket_mode (--memcache-socket-mode) = "999": want octal`},
		{func(c *Config) { c.Memcache.TLS.Listen = "127.0.0.1:1" }, "needs memcache.tls.cert_file and key_file (--tls-cert, --tls-key)"},
		{func(c *Config) { c.API.TLS.Enabled = true }, "api.tls.enabled (--api-tls) needs api.tls.cert_file"},
		{func(c *Config) { c.Limits.MaxPendingPerConn = 0 }, "limits.max_pending_per_conn = 0: must be at least 1"},
		{func(c *Config) { c.Log.Format = "xml" }, `log.format (--log-format) = "xml": use text or json`},
	} {
		c := Default()
		tc.mutate(&c)
		err := c.Validate()
		require.Error(t, err, tc.want)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// A setting's old name still works, with a notice, and one source giving
// both names with different values is an error. dispatch.flights_per_node
// was dispatch.rounds_per_node in YAML; it has no variable or flag, so the
// test gives it made-up ones to hold the env and flag forms to the same.
func TestOldNamesAreAliases(t *testing.T) {
	saved := settings
	t.Cleanup(func() { settings = saved })
	settings = slices.Clone(settings)
	s := lookupSetting("dispatch.flights_per_node")
	require.NotNil(t, s)
	require.Equal(t, "dispatch.rounds_per_node", s.Old.Key)
	s.Env, s.Old.Env = "NDBGATE_FLIGHTS_PER_NODE", "NDBGATE_ROUNDS_PER_NODE"
	s.Flag, s.Old.Flag = "flights-per-node", "rounds-per-node"

	load := func(env map[string]string, args ...string) (Config, string, error) {
		var out bytes.Buffer
		c, err := Load("serve", args, envOf(env), &out)
		return c, out.String(), err
	}
	oldFile := writeFile(t, "dispatch:\n  rounds_per_node: 3\n")
	for _, tc := range []struct {
		name   string
		env    map[string]string
		args   []string
		notice string
	}{
		{"yaml", map[string]string{configEnv: oldFile}, nil,
			"ndbgate: dispatch.rounds_per_node is a deprecated name: use dispatch.flights_per_node (config file " + oldFile + ")"},
		{"env", map[string]string{"NDBGATE_ROUNDS_PER_NODE": "3"}, nil,
			"ndbgate: NDBGATE_ROUNDS_PER_NODE is a deprecated name: use NDBGATE_FLIGHTS_PER_NODE"},
		{"flag", nil, []string{"--rounds-per-node", "3"},
			"ndbgate: --rounds-per-node is a deprecated name: use --flights-per-node"},
		{"same value under both names", map[string]string{"NDBGATE_ROUNDS_PER_NODE": "3", "NDBGATE_FLIGHTS_PER_NODE": " 3"}, nil,
			"ndbgate: NDBGATE_ROUNDS_PER_NODE is a deprecated name: use NDBGATE_FLIGHTS_PER_NODE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, out, err := load(tc.env, tc.args...)
			require.NoError(t, err)
			assert.Equal(t, 3, c.Dispatch.FlightsPerNode)
			assert.Equal(t, tc.notice+"\n", out)
		})
	}

	t.Run("the new names say nothing", func(t *testing.T) {
		c, out, err := load(map[string]string{configEnv: writeFile(t, "dispatch: {flights_per_node: 2}\n"), "NDBGATE_FLIGHTS_PER_NODE": "4"}, "--flights-per-node", "5")
		require.NoError(t, err)
		assert.Equal(t, 5, c.Dispatch.FlightsPerNode)
		assert.Empty(t, out)
	})

	t.Run("across sources the last wins", func(t *testing.T) {
		c, _, err := load(map[string]string{configEnv: oldFile, "NDBGATE_FLIGHTS_PER_NODE": "4"})
		require.NoError(t, err)
		assert.Equal(t, 4, c.Dispatch.FlightsPerNode, "env over the file's old name")
		c, _, err = load(map[string]string{"NDBGATE_FLIGHTS_PER_NODE": "4"}, "--rounds-per-node", "5")
		require.NoError(t, err)
		assert.Equal(t, 5, c.Dispatch.FlightsPerNode, "an old flag over env")
	})

	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"yaml", map[string]string{configEnv: writeFile(t, "dispatch:\n  rounds_per_node: 3\n  flights_per_node: 2\n")}, nil,
			"dispatch.rounds_per_node and dispatch.flights_per_node name one setting (dispatch.rounds_per_node is deprecated), given 3 and 2: give one"},
		{"env", map[string]string{"NDBGATE_ROUNDS_PER_NODE": "3", "NDBGATE_FLIGHTS_PER_NODE": "2"}, nil,
			`environment: NDBGATE_ROUNDS_PER_NODE and NDBGATE_FLIGHTS_PER_NODE name one setting (NDBGATE_ROUNDS_PER_NODE is deprecated), given "3" and "2": give one`},
		{"flag", nil, []string{"--flights-per-node", "2", "--rounds-per-node", "3"},
			`--rounds-per-node and --flights-per-node name one setting (--rounds-per-node is deprecated), given "3" and "2": give one`},
	} {
		t.Run("both names differ in "+tc.name, func(t *testing.T) {
			_, _, err := load(tc.env, tc.args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	var out bytes.Buffer
	WriteHelp(&out, "serve")
	assert.Contains(t, out.String(), "deprecated name dispatch.rounds_per_node, NDBGATE_ROUNDS_PER_NODE, --rounds-per-node")
}

// The settings in use name no deprecated alias, and no old name is another
// setting's name.
func TestOldNamesAreNotNames(t *testing.T) {
	for _, s := range settings {
		for _, o := range settings {
			if s.Old.Key != "" {
				assert.NotEqual(t, o.Key, s.Old.Key)
			}
			if s.Old.Env != "" {
				assert.NotEqual(t, o.Env, s.Old.Env)
			}
			if s.Old.Flag != "" {
				assert.NotEqual(t, o.Flag, s.Old.Flag)
			}
		}
	}
}
