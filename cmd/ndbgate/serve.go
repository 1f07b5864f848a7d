package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/ndbgate/ndbgate/config"
	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/gateway/rowapi"
	"github.com/ndbgate/ndbgate/internal/hostidle"
	"github.com/ndbgate/ndbgate/internal/ndbmemcache"
	"github.com/ndbgate/ndbgate/internal/procs"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
	grpcfront "github.com/ndbgate/ndbgate/protocols/grpc"
	"github.com/ndbgate/ndbgate/protocols/memcache"
	"github.com/ndbgate/ndbgate/protocols/memcache/transport"
	"github.com/ndbgate/ndbgate/protocols/rest"
)

// serve wires the configured pieces and runs until ctx is done.
func serve(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	itemMax := int(cfg.Limits.ItemSizeMax)
	backendDriver, err := openBackend(cfg, log)
	if err != nil {
		return err
	}
	backend := ndbclient.NewClientWith(backendDriver, dispatchConfig(cfg, backendDriver, log))
	defer backend.Close()

	var local *ndbclient.Client
	if needsLocal(cfg) || cfg.Ndbmemcache.Role != "" { // a role's reload may add a caching prefix
		local = ndbclient.NewClient(newEmbedded(cfg))
		defer local.Close()
	}
	rd := ndbmemcache.Reader{Client: backend, Connectstring: cfg.NDB.Connectstring}
	var role *ndbmemcache.Config
	if cfg.Ndbmemcache.Role != "" {
		if role, err = rd.Read(ctx, cfg.Ndbmemcache.Role); err != nil {
			return fmt.Errorf("ndbmemcache.role (--ndbmemcache-role) %q: %w", cfg.Ndbmemcache.Role, err)
		}
	}
	// The declared tables first: a container on one of them takes its
	// shape, rather than making the table in its own.
	if err := buildTables(cfg, backend); err != nil {
		return err
	}
	routes, err := allRoutes(cfg, role, backend, local, itemMax, log)
	if err != nil {
		return err
	}
	svc, err := gateway.New(gateway.Options{Backend: backend, Local: local, Routes: routes, ItemSizeMax: itemMax, Logger: log})
	if err != nil {
		return err
	}

	keys, apiTLS, err := apiSecurity(cfg.API)
	if err != nil {
		return err
	}
	lim := cfg.API.Limits
	rows := rowapi.New(backend, rowapi.Limits{MaxBatch: lim.MaxBatch, MaxFilters: lim.MaxFilters, MaxColumns: lim.MaxColumns, MaxIdentifier: lim.MaxIdentifier})
	for _, c := range svc.Containers() {
		// A row-API write to a container's table is a memcache write too.
		rows.Keep(c.Table.Database, c.Table.Name, svc.RowInvariants(c))
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler, collectors.MetricsGC)), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ndbclient.RegisterMetrics(reg, backendDriver)
	if role != nil {
		rd.Metrics = ndbmemcache.NewMetrics(reg)
		rd.Metrics.Serving(routes)
		host, _ := os.Hostname()
		if err := rd.SignOn(ctx, role.Role, host, time.Now()); err != nil {
			log.Warn("ndbmemcache: sign-on not recorded", "error", err)
		}
		if every := time.Duration(cfg.Ndbmemcache.ReloadInterval); every > 0 {
			go rd.Watch(ctx, role, every, func(next *ndbmemcache.Config) error {
				routes, err := allRoutes(cfg, next, backend, local, itemMax, log)
				if err != nil {
					return err
				}
				if err := svc.SetRoutes(routes); err != nil {
					return err
				}
				rd.Metrics.Serving(routes)
				return nil
			}, log)
		}
	}
	memcacheOn := cfg.Listeners.Memcache != "" || cfg.Memcache.Socket != "" || cfg.Memcache.TLS.Listen != ""
	var sharded []gateway.ShardedRequests // front ends on event loops
	if memcacheOn {
		sharded = append(sharded, memcache.RegisterMetrics(reg))
	}
	gateway.RegisterMetrics(reg, sharded...)

	errc := make(chan error, 3)
	var mc *memcache.Server
	if memcacheOn {
		mcfg, err := memcacheSecurity(cfg.Memcache)
		if err != nil {
			return err
		}
		mc = memcache.NewServer(memcache.Config{
			Addr:           cfg.Listeners.Memcache,
			MaxConnections: cfg.Limits.MaxConnections,
			MaxPending:     cfg.Limits.MaxPendingPerConn,
			MaxPendingKeys: cfg.Limits.MaxPendingKeysPerConn,
			ItemSizeMax:    itemMax,
			Version:        memcacheVersion(),
			Evictions:      cfg.NDB.Connectstring == "", // the embedded engine evicts; NDB refuses
			Settings: [][2]string{
				{"ndbgate_backend", backendDriver.Name()},
				{"ndbgate_version", version},
			},
			Credentials:   mcfg.Credentials,
			Socket:        mcfg.Socket,
			SocketMode:    mcfg.SocketMode,
			EventLoop:     cfg.Memcache.EventLoop,
			BatchSyscalls: cfg.Memcache.IOUringOn(),
			BusyPoll:      cfg.Memcache.BusyPollLimit(cfg.NDB.Connectstring != ""),
			HaltPoll:      cfg.Memcache.HaltPollOn(cfg.NDB.Connectstring != "", transport.DefaultLoops(), hostidle.Read("/").HaltsAtOnce()),
			TLSAddr:       mcfg.TLSAddr,
			TLS:           mcfg.TLS,
			PartialBytes:  partialBudget(int64(cfg.Embedded.MemoryLimit), itemMax),
		}, svc, log)
		go func() {
			if err := mc.Serve(); err != nil {
				errc <- memcache.ListenError(cfg.Listeners.Memcache, err)
			}
		}()
		select {
		case <-mc.Started():
		case err := <-errc:
			return err
		case <-ctx.Done():
			return nil
		}
		log.LogAttrs(ctx, slog.LevelInfo, "memcache listening", slog.String("addr", cfg.Listeners.Memcache),
			slog.String("socket", cfg.Memcache.Socket), slog.String("tls", cfg.Memcache.TLS.Listen),
			slog.Bool("mutual_tls", cfg.Memcache.TLS.ClientCAFile != ""), slog.Bool("sasl", mcfg.Credentials != nil))
	}

	// REST and gRPC have no event loops of their own: a keeper holds a P
	// while they serve, so that the runtime's monitor does not wake up on
	// each request (internal/procs/keeper.go). The first memcache epoll
	// loop is the keeper when there is one; else a goroutine of its own.
	if cfg.Listeners.GRPC != "" || cfg.Listeners.REST != "" {
		defer procs.StartKeeper()()
	}

	// gRPC listens before HTTP so that a ready /readyz means every listener is up.
	var gs *grpc.Server
	if cfg.Listeners.GRPC != "" {
		ln, err := net.Listen("tcp", cfg.Listeners.GRPC)
		if err != nil {
			return fmt.Errorf("grpc listener %s: %w (pick another --grpc address, or --grpc '' to turn it off)", cfg.Listeners.GRPC, err)
		}
		gs = grpcfront.NewServer(grpcfront.Options{KV: svc, Rows: rows, Keys: keys, TLS: apiTLS,
			MaxMultiGet: lim.MaxMultiGet, MaxMessage: int(lim.MaxBody), Logger: log})
		go func() {
			if err := gs.Serve(ln); err != nil {
				errc <- fmt.Errorf("grpc: %w", err)
			}
		}()
		log.LogAttrs(ctx, slog.LevelInfo, "grpc listening", slog.String("addr", cfg.Listeners.GRPC), slog.Bool("tls", apiTLS != nil),
			slog.Bool("api_keys", keys != nil), slog.String("services", "grpcserver.v1.RonDBREST ndbgate.v1.KV grpc.health.v1.Health reflection"))
	}
	var hs *http.Server
	if cfg.Listeners.REST != "" {
		ln, err := net.Listen("tcp", cfg.Listeners.REST)
		if err != nil {
			return fmt.Errorf("rest listener %s: %w (pick another --rest address, or --rest '' to turn it off)", cfg.Listeners.REST, err)
		}
		api := rest.New(rest.Options{Rows: rows, KV: svc, Keys: keys, MaxBody: int64(lim.MaxBody), MaxMultiGet: lim.MaxMultiGet, Logger: log,
			Extra: opsHandlers(reg, svc)})
		if apiTLS != nil {
			ln = tls.NewListener(ln, apiTLS)
		}
		// A client that trickles its body or idles on a connection is cut off;
		// bodies are bounded by api.limits.max_body.
		hs = &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
			IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		go func() {
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
		log.LogAttrs(ctx, slog.LevelInfo, "http listening", slog.String("addr", cfg.Listeners.REST), slog.Bool("tls", apiTLS != nil),
			slog.Bool("api_keys", keys != nil), slog.String("routes", "/metrics /healthz /readyz "+api.Routes()))
	}
	log.LogAttrs(ctx, slog.LevelInfo, "ndbgate ready", slog.String("version", version), slog.String("backend", backendDriver.Name()), slog.Int("routes", len(routes)))

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	log.LogAttrs(context.Background(), slog.LevelInfo, "shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if hs != nil {
		_ = hs.Shutdown(sctx)
	}
	if gs != nil {
		stopped := make(chan struct{})
		go func() { gs.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-sctx.Done():
			gs.Stop()
		}
	}
	if mc != nil {
		if err := mc.Shutdown(sctx); err != nil {
			log.LogAttrs(sctx, slog.LevelWarn, "memcache shutdown", slog.Any("error", err))
		}
	}
	if err := svc.Drain(sctx); err != nil {
		log.LogAttrs(sctx, slog.LevelWarn, "large values' old parts not all freed", slog.Any("error", err))
	}
	return runErr
}

func memcacheVersion() string { return "1.6.0-ndbgate-" + version }

// opsHandlers are the GET routes served beside the REST API. The API routes
// them (rest.Options.Extra): an http.ServeMux in front would redirect paths
// holding "//", "/./" or "/../", which KV keys may hold.
func opsHandlers(reg *prometheus.Registry, svc *gateway.Service) map[string]http.Handler {
	return map[string]http.Handler{
		"/metrics": promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		"/healthz": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if err := svc.Health(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = fmt.Fprintf(w, `{"status":"stuck","error":%q}`, err.Error())
				return
			}
			_, _ = w.Write([]byte(`{"status":"ok"}`))
		}),
		"/readyz": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if err := svc.Ready(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = fmt.Fprintf(w, `{"status":"unavailable","error":%q}`, err.Error())
				return
			}
			// Ready with data nodes down is still ready (replicas cover them);
			// say how many are live so an operator sees a degraded cluster.
			st := svc.DriverStats()
			_, _ = fmt.Fprintf(w, `{"status":"ready","data_nodes":%d,"live_data_nodes":%d,"partitions":%d,"connects":%d}`,
				st.Nodes, st.LiveNodes, st.Partitions, st.Connects)
		}),
	}
}

func newEmbedded(cfg config.Config) *embedded.Engine {
	return embedded.New(embedded.Config{
		Partitions:   cfg.Embedded.Partitions,
		Nodes:        cfg.Embedded.Nodes,
		MemoryLimit:  uint64(cfg.Embedded.MemoryLimit),
		ReapInterval: time.Duration(cfg.Embedded.ReapInterval),
		HugePages:    cfg.Embedded.HugePages,

		RoundTripDelay: time.Duration(cfg.Embedded.SimulatedRoundTrip),
	})
}

// dispatchConfig maps the configuration onto the backend dispatcher. Lanes
// (per-node queues, coalescing) pay off only when a round trip costs
// something: not with a driver that completes every flight inline (the
// embedded engine without a simulated round trip), nor with one whose Submit
// never waits (the embedded engine with fsync always: a read must not queue
// behind other writes' fsync).
func dispatchConfig(cfg config.Config, d ndbclient.Driver, log *slog.Logger) ndbclient.DispatchConfig {
	dc := cfg.Dispatch
	lanes := true
	if in, ok := d.(ndbclient.InlineDriver); ok && in.CompletesInline() {
		lanes = false
	}
	if nb, ok := d.(ndbclient.NonBlockingDriver); ok && nb.SubmitNeverWaits() {
		lanes = false
	}
	return ndbclient.DispatchConfig{
		RoundSize:      dc.RoundSize,
		FlightsPerNode: dc.FlightsPerNode,
		MaxInFlight:    dc.MaxInFlight,
		MaxRetries:     dc.MaxRetries,
		Coalesce:       dc.Coalesce == nil || *dc.Coalesce,
		Lanes:          lanes,
		Log:            log,
	}
}

// openBackend returns the NDB driver when a connectstring is set, else the
// embedded engine (loading its data dir, if one is set).
func openBackend(cfg config.Config, log *slog.Logger) (ndbclient.Driver, error) {
	if cfg.NDB.Connectstring != "" {
		return openNDB(cfg, log)
	}
	if cfg.Embedded.DataDir == "" {
		return newEmbedded(cfg), nil
	}
	fsync, err := embedded.ParseFsync(cfg.Embedded.Fsync)
	if err != nil {
		return nil, fmt.Errorf("embedded.fsync (--fsync): %w", err)
	}
	e, err := embedded.Open(embedded.Config{
		Partitions:   cfg.Embedded.Partitions,
		Nodes:        cfg.Embedded.Nodes,
		MemoryLimit:  uint64(cfg.Embedded.MemoryLimit),
		ReapInterval: time.Duration(cfg.Embedded.ReapInterval),
		HugePages:    cfg.Embedded.HugePages,

		RoundTripDelay: time.Duration(cfg.Embedded.SimulatedRoundTrip),

		DataDir:          cfg.Embedded.DataDir,
		Fsync:            fsync,
		SnapshotInterval: time.Duration(cfg.Embedded.SnapshotInterval),
		SnapshotLogSize:  int64(cfg.Embedded.SnapshotLogSize),
		Logger:           log,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded.data_dir (--data-dir): %w", err)
	}
	return e, nil
}

func needsLocal(cfg config.Config) bool {
	for _, kp := range cfg.KeyPrefixes {
		if kp.Policy == "caching" || kp.Policy == "local-only" {
			return true
		}
	}
	return false
}

// allRoutes are the routes of the YAML's key prefixes, or of role when one
// is served: then a YAML key prefix wins over the role's of the same prefix.
// A role's prefix that cannot be served is logged and refused.
func allRoutes(cfg config.Config, role *ndbmemcache.Config, backend, local *ndbclient.Client, itemMax int, log *slog.Logger) ([]gateway.Route, error) {
	if role == nil {
		return buildRoutes(cfg, backend, local, itemMax)
	}
	routes := role.Routes(backend, local, itemMax)
	for i, rt := range routes { // in the order of role.Prefixes
		if rt.Refused != nil {
			msg := rt.Refused.Error()
			if e := (*ndbclient.Error)(nil); errors.As(rt.Refused, &e) {
				msg = e.Message // without the code: the line says what is refused and why
			}
			log.Error("ndbmemcache: "+msg, "role", role.Role)
		} else {
			log.Info("ndbmemcache: serving key prefix", "role", role.Role, "prefix", rt.Prefix, "container", role.Prefixes[i].Container,
				"policy", role.Prefixes[i].PolicyName, "access", rt.Policy.String())
		}
	}
	if len(cfg.KeyPrefixes) == 0 {
		return routes, nil
	}
	own, err := buildRoutes(cfg, backend, local, itemMax)
	if err != nil {
		return nil, err
	}
	for _, o := range own {
		i := slices.IndexFunc(routes, func(rt gateway.Route) bool { return rt.Prefix == o.Prefix })
		if i < 0 {
			routes = append(routes, o)
			continue
		}
		log.Warn("ndbmemcache: the YAML key prefix wins over the role's", "prefix", o.Prefix, "role", role.Role)
		routes[i] = o
	}
	return routes, nil
}

// buildRoutes resolves containers against the backend's tables (creating
// memcache-shaped tables on the embedded engine) and maps key prefixes.
func buildRoutes(cfg config.Config, backend, local *ndbclient.Client, itemMax int) ([]gateway.Route, error) {
	specs := map[string]gateway.ContainerSpec{}
	tables := map[string]*ndbclient.Table{}
	large := map[string]string{} // container: its large_values_table
	declared := map[string]bool{}
	for _, tc := range cfg.Tables {
		declared[tc.Database+"."+tc.Name] = true
	}
	def := gateway.DefaultContainerSpec()
	specs[def.Name] = def
	tables[def.Name] = gateway.DemoTable(itemMax)
	for _, c := range cfg.Containers {
		specs[c.Name] = gateway.ContainerSpec{
			Name: c.Name, KeyColumns: c.KeyColumns, ValueColumns: c.ValueColumns,
			FlagsColumn: c.FlagsColumn, CasColumn: c.CasColumn, ExpireColumn: c.ExpireColumn, MathColumn: c.MathColumn,
			StateColumn: c.StateColumn, LargeValues: c.LargeValuesTable != "",
		}
		t := memcacheShape(c, itemMax)
		tables[c.Name] = t
		large[c.Name] = c.LargeValuesTable
	}
	prefixes := cfg.KeyPrefixes
	if len(prefixes) == 0 {
		name := gateway.DefaultContainerName
		if len(cfg.Containers) > 0 {
			name = cfg.Containers[0].Name
		}
		prefixes = []config.KeyPrefix{{Prefix: "", Container: name, Policy: "ndb-only"}}
	}
	built := map[string]*gateway.Container{}
	var routes []gateway.Route
	for _, kp := range prefixes {
		policy, err := gateway.ParsePolicy(kp.Policy)
		if err != nil {
			return nil, fmt.Errorf("key prefix %q: %w", kp.Prefix, err)
		}
		c, ok := built[kp.Container]
		if !ok {
			t := tables[kp.Container]
			var err error
			if declared[t.FullName()] {
				// buildTables made it, or checked the data dir's against
				// its declaration: the container takes that shape.
				t, err = backend.Table(t.Database, t.Name)
			} else {
				t, err = ensureTable(backend, t)
			}
			if err != nil {
				return nil, fmt.Errorf("container %q: %w", kp.Container, err)
			}
			if c, err = gateway.BindContainer(specs[kp.Container], backend, t); err != nil {
				return nil, err
			}
			if lv := large[kp.Container]; lv != "" {
				parts := func(db, name string) (*ndbclient.Table, error) {
					return ensurePartsTable(backend, gateway.ExternalValuesTable(db, name), t.Eviction)
				}
				if err := c.KeepLargeValuesIn(lv, backend, parts); err != nil {
					return nil, err
				}
			}
			if local != nil {
				if _, err := ensureTable(local, gateway.LocalTable(c)); err != nil {
					return nil, fmt.Errorf("container %q (local cache): %w", kp.Container, err)
				}
			}
			built[kp.Container] = c
		}
		routes = append(routes, gateway.Route{Prefix: kp.Prefix, Container: c, Policy: policy})
	}
	return routes, nil
}

// partialBudget is what memcache connections may hold, together, of values
// still arriving: memcache.DefaultPartialBytes, or a quarter of the memory
// limit when that is less (memcached allocates a value before reading it,
// within -m), but room for two of the largest items at least.
func partialBudget(memoryLimit int64, itemMax int) int64 {
	budget := int64(memcache.DefaultPartialBytes)
	if memoryLimit > 0 {
		budget = min(budget, memoryLimit/4)
	}
	return max(budget, 2*int64(itemMax)+4096)
}

// memcacheShape is the table the embedded engine creates for a container that
// names its columns but whose table does not exist yet.
func memcacheShape(c config.Container, itemMax int) *ndbclient.Table {
	t := &ndbclient.Table{Database: c.Database, Name: c.Table, ExpireColumn: -1, Eviction: c.Eviction == nil || *c.Eviction}
	for _, k := range c.KeyColumns {
		t.PrimaryKey = append(t.PrimaryKey, len(t.Columns))
		t.Columns = append(t.Columns, ndbclient.Column{Name: k, Type: ndbclient.TypeVarchar, Length: 250})
	}
	if c.LargeValuesTable != "" {
		itemMax = largeInline // the rest in parts, as ndbmemcache's demo_table_large
	}
	for _, v := range c.ValueColumns {
		t.Columns = append(t.Columns, ndbclient.Column{Name: v, Type: ndbclient.TypeVarbinary, Length: itemMax, Nullable: true})
	}
	add := func(name string, typ ndbclient.ColumnType, nullable bool) int {
		if name == "" {
			return -1
		}
		t.Columns = append(t.Columns, ndbclient.Column{Name: name, Type: typ, Nullable: nullable})
		return len(t.Columns) - 1
	}
	add(c.FlagsColumn, ndbclient.TypeUint32, false)
	add(c.CasColumn, ndbclient.TypeUint64, false)
	if x := add(c.ExpireColumn, ndbclient.TypeUint32, false); c.LargeValuesTable == "" {
		t.ExpireColumn = x // with large values the gateway keeps it (ContainerSpec.LargeValues)
	}
	add(c.MathColumn, ndbclient.TypeUint64, true)
	add(c.StateColumn, ndbclient.TypeUint64, true)
	if c.LargeValuesTable != "" {
		add(gateway.LargeIDColumn, ndbclient.TypeUint32, true)
		add(gateway.LargeSizeColumn, ndbclient.TypeUint32, true)
	}
	return t
}

// largeInline is the value column of a container's table made with large
// values in parts: ndbmemcache's demo_table_large's string_value.
const largeInline = 2000

// ensureTable returns the driver's table of t's name, creating it if the driver
// can (the embedded engine); a table of another shape is a schema error. A
// table the embedded engine loaded from its data dir must still have the
// configured shape (CreateTable checks it and returns the stored one).
func ensureTable(cl *ndbclient.Client, t *ndbclient.Table) (*ndbclient.Table, error) {
	if got, err := cl.Table(t.Database, t.Name); err == nil {
		if r, ok := cl.Driver().(interface{ Restored(*ndbclient.Table) bool }); !ok || !r.Restored(t) {
			return got, nil
		}
	}
	return cl.Driver().CreateTable(t)
}

// ensurePartsTable is ensureTable for a container's large values' parts:
// they are evicted when the container's rows are (the embedded engine), so
// that the parts of a row evicted before them do not hold the memory for
// ever (a read whose part is gone is a miss), and never when its rows are
// not. A data dir's parts table made without eviction by an earlier build
// is kept as it is, with a warning.
func ensurePartsTable(cl *ndbclient.Client, t *ndbclient.Table, eviction bool) (*ndbclient.Table, error) {
	t.Eviction = eviction
	got, err := ensureTable(cl, t)
	if err != nil && eviction {
		old := *t
		old.Eviction = false
		r, ok := cl.Driver().(interface{ Restored(*ndbclient.Table) bool })
		if got, oldErr := ensureTable(cl, &old); oldErr == nil && ok && r.Restored(&old) {
			slog.Warn("the large values' parts table in the data dir was made without eviction: parts of evicted items are never freed; start on a new data dir to have them evicted", "table", t.FullName())
			return got, nil
		}
	}
	if err == nil && got.Eviction != eviction {
		// Made by another container of the other kind (ensureTable checks
		// no shape of a table this run made).
		return nil, fmt.Errorf("large values' parts table %s is shared by containers that evict and containers that do not: give them one eviction setting, or parts tables of their own", t.FullName())
	}
	return got, err
}
