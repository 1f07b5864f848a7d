package gateway

import (
	"context"
	"errors"
	"hash/maphash"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndbgate/ndbgate/internal/shardmetrics"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// The Service: its options, routes, cas sequence, expiry clock and
// flush_all. A request's run starts at Do (stages.go).

// Options wires a Service.
type Options struct {
	// Backend serves ndb-only and caching routes: the NDB cluster, or the embedded
	// engine when no cluster is configured.
	Backend *ndbclient.Client
	// Local is the in-process cache for local-only and caching routes. It may be
	// nil when no route uses those policies.
	Local  *ndbclient.Client
	Routes []Route
	// ItemSizeMax bounds a value's length after append/prepend/incr.
	ItemSizeMax int
	Logger      *slog.Logger
	// Now is the clock for expiry (tests may replace it).
	Now func() time.Time
}

// Service applies memcached semantics to ndbclient operations. It is safe for
// concurrent use; each Request is used by one caller at a time.
type Service struct {
	backend *ndbclient.Client
	local   *ndbclient.Client
	// routing is swapped whole when the routes change (SetRoutes); a
	// request keeps the one it started with.
	routing atomic.Pointer[routing]
	itemMax int
	log     *slog.Logger
	now     func() time.Time
	casSeq  atomic.Uint64
	started time.Time
	stats   *shardmetrics.Counters // by Stat

	flushMu    sync.Mutex
	flushTimer *time.Timer

	// fills orders caching routes' local-copy fills against their drops.
	fills fillGuard

	// freeingParts counts the part deletes that writes left running after
	// their replies (largefree.go).
	freeingParts atomic.Int64
}

// routing is what the routes decide: the router, the distinct containers
// behind it, and whether any keys can share a multi-key set.
type routing struct {
	router     *router
	containers []*Container
	// oneWritePath: every route's sets go through the same client, and none
	// is refused, so any keys can share a multi-key set (AddSet).
	oneWritePath bool
}

// newRouting validates routes against the clients the service has.
func newRouting(routes []Route, backend, local *ndbclient.Client) (*routing, error) {
	for _, rt := range routes {
		if rt.Refused != nil {
			continue
		}
		if rt.Container == nil {
			return nil, errors.New("gateway: key prefix " + rt.Prefix + " has no container")
		}
		if rt.Policy.UsesLocal() && local == nil {
			return nil, errors.New("gateway: route " + rt.Prefix + " needs the local cache, which is not configured")
		}
		if err := rt.Container.Prepare(); err != nil {
			return nil, err
		}
	}
	r, err := newRouter(routes)
	if err != nil {
		return nil, err
	}
	for _, rt := range r.routes {
		if rt.Refused == nil {
			if err := rt.Container.ServesPolicy(rt.Policy); err != nil {
				return nil, err
			}
		}
	}
	rg := &routing{router: r, oneWritePath: true}
	seen := map[*Container]bool{}
	sets := map[Access]bool{}
	for _, rt := range r.routes {
		if rt.Refused != nil {
			continue
		}
		if !seen[rt.Container] {
			seen[rt.Container] = true
			rg.containers = append(rg.containers, rt.Container)
			if err := rt.Container.keepsItsExpiry(backend); err != nil {
				return nil, err
			}
		}
		a := rt.Policy.Set
		if a == AccessCaching {
			a = AccessNDB // both write to the backend
		}
		sets[a] = true
	}
	// A large value's write takes stages of its own, never a set of several.
	rg.oneWritePath = len(sets) <= 1 && !sets[AccessDisabled] && !slices.ContainsFunc(rg.containers, func(c *Container) bool { return c.Large != nil })
	return rg, nil
}

// New validates the routes and builds a Service.
func New(o Options) (*Service, error) {
	if o.Backend == nil {
		return nil, errors.New("gateway: no backend client")
	}
	rg, err := newRouting(o.Routes, o.Backend, o.Local)
	if err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ItemSizeMax <= 0 {
		o.ItemSizeMax = 1 << 20
	}
	s := &Service{backend: o.Backend, local: o.Local, itemMax: o.ItemSizeMax, log: o.Logger, now: o.Now, started: o.Now(), stats: shardmetrics.NewCounters(int(numStats))}
	s.fills.seed = maphash.MakeSeed()
	s.routing.Store(rg)
	// CAS values must differ across restarts of a gateway sharing a persistent
	// cluster, so there the sequence starts at the clock in microseconds; it then
	// grows by one per write, which stays ahead of the clock below a million
	// writes a second. A volatile backend (the embedded engine) forgets
	// everything on restart, so it counts from 1 as memcached does: some meta
	// clients (meta-memcache's parser) read a cas token as a 32-bit number.
	// Where the rows outlive the process and the driver can tell (the
	// embedded engine's data dir), it also starts above every cas the rows
	// hold: the counter may have run ahead of the clock.
	if v, ok := o.Backend.Driver().(ndbclient.VolatileDriver); !ok || !v.Volatile() {
		start := uint64(o.Now().UnixMicro())
		if m, ok := o.Backend.Driver().(ndbclient.ColumnMaxer); ok {
			for _, c := range rg.containers {
				if c.CasColumn >= 0 && c.Table != nil {
					start = max(start, m.MaxColumn(c.Table, c.CasColumn))
				}
			}
		}
		s.casSeq.Store(start)
	}
	return s, nil
}

// SetRoutes replaces the routes while the service serves: requests already
// started finish on the routes they began with. It refuses routes New would
// refuse, and then changes nothing.
func (s *Service) SetRoutes(routes []Route) error {
	rg, err := newRouting(routes, s.backend, s.local)
	if err != nil {
		return err
	}
	s.routing.Store(rg)
	return nil
}

// Started is when the service was created (memcached's uptime counts from it).
func (s *Service) Started() time.Time { return s.started }

// ItemSizeMax is the largest value the service accepts.
func (s *Service) ItemSizeMax() int { return s.itemMax }

// MultiGetPieceBytes bounds the bytes of values one request of a multi-get
// reads: a front end reads a get of many keys in pieces of MultiGetPiece
// keys, so that what it holds in replies stays bounded.
const MultiGetPieceBytes = 16 << 20

// MultiGetPiece is how many keys one request of a multi-get may read:
// MultiGetPieceBytes of the largest value the containers hold (or can hold).
func (s *Service) MultiGetPiece() int { return max(1, MultiGetPieceBytes/s.largestValue()) }

// largestValue is the longest value a get can return from any container:
// its value columns' widths, at most the item size limit, and at most the
// longest row its table has held where the engine knows it (RowSizer).
func (s *Service) largestValue() int {
	largest := 0
	for _, c := range s.routing.Load().containers {
		n := min(c.widest, s.itemMax)
		if held, ok := s.largestRow(c.Table); ok && c.Large == nil { // a large value's row holds none of its parts
			n = min(n, held)
		}
		largest = max(largest, n)
	}
	return max(largest, 1)
}

// largestRow is the longest row t has held in the engines that keep it, if
// they all know.
func (s *Service) largestRow(t *ndbclient.Table) (int, bool) {
	n := 0
	for _, cl := range []*ndbclient.Client{s.backend, s.local} {
		if cl == nil {
			continue
		}
		rs, ok := cl.Driver().(ndbclient.RowSizer)
		if !ok {
			return 0, false
		}
		n = max(n, rs.LargestRow(t))
	}
	return n, true
}

func (s *Service) nextCas() uint64 { return s.casSeq.Add(1) }

// SetsCanShareABatch reports whether any keys may go in one multi-key set
// (Request.AddSet): every route writes through the same client. Otherwise a
// key whose route writes elsewhere than the first key's fails.
func (s *Service) SetsCanShareABatch() bool { return s.routing.Load().oneWritePath }

// Containers lists the distinct containers behind the routes.
func (s *Service) Containers() []*Container { return s.routing.Load().containers }

// Ready reports whether the backend can serve.
func (s *Service) Ready() error { return s.backend.Driver().Ready() }

// Health reports a backend that cannot recover by itself (for liveness
// probes), where its driver can tell (ndbclient.HealthReporter).
func (s *Service) Health() error {
	if h, ok := s.backend.Driver().(ndbclient.HealthReporter); ok {
		return h.Health()
	}
	return nil
}

// expireAt converts memcached's exptime into an absolute Unix time for the expire
// column: 0 never; negative, or absolute in the past, is already expired (1).
func (s *Service) expireAt(exptime int64) uint64 {
	if exptime == 0 { // the common case reads no clock
		return 0
	}
	if exptime < 0 {
		return 1
	}
	now := s.now().Unix()
	switch {
	case exptime > exptimeRelativeMax:
		if exptime <= now {
			return 1
		}
		if exptime > 1<<32-1 {
			return 1<<32 - 1
		}
		return uint64(exptime)
	default:
		return uint64(now + exptime)
	}
}

// exptimeRelativeMax is the largest relative exptime (30 days): a larger one,
// or a larger flush_all delay, is a unix time, as memcached's realtime()
// reads them.
const exptimeRelativeMax = 60 * 60 * 24 * 30

// FlushAll removes every item of every container now (delay <= 0) or after
// delay seconds (past 30 days: at that unix time, now if it has passed),
// replacing any flush already scheduled, as memcached does. It
// returns the first error of a flush now (a delete_all the backend refused,
// e.g. a data dir that cannot be written), nil for a scheduled one. Callers
// run it off any event loop: the scan-delete may take a while.
func (s *Service) FlushAll(delay int64) error {
	s.stats.Add(shardmetrics.SharedShard, int(StatCmdFlush), 1)
	if delay > exptimeRelativeMax {
		delay -= s.now().Unix()
	}
	s.flushMu.Lock()
	if s.flushTimer != nil {
		s.flushTimer.Stop()
		s.flushTimer = nil
	}
	if delay > 0 {
		s.flushTimer = time.AfterFunc(time.Duration(delay)*time.Second, func() { _ = s.flushNow() })
		s.flushMu.Unlock()
		return nil
	}
	s.flushMu.Unlock()
	return s.flushNow()
}

func (s *Service) flushNow() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var first error
	type flush struct {
		cl *ndbclient.Client
		t  *ndbclient.Table
	}
	seen := map[flush]bool{}
	// As ndbmemcache: the local cache is always flushed, the backend only
	// under policies that say so (flush_from_db).
	for _, rt := range s.routing.Load().router.routes {
		if rt.Refused != nil {
			continue
		}
		var targets []flush
		if rt.Policy.UsesLocal() {
			targets = append(targets, flush{s.local, rt.Container.Table})
		}
		if !rt.Policy.KeepOnFlush {
			targets = append(targets, flush{s.backend, rt.Container.Table})
			if lv := rt.Container.Large; lv != nil {
				targets = append(targets, flush{s.backend, lv.Parts})
			}
		}
		for _, f := range targets {
			if seen[f] {
				continue
			}
			seen[f] = true
			op := &ndbclient.Op{Kind: ndbclient.OpDeleteAll, Table: f.t}
			b := &ndbclient.Batch{Ops: []*ndbclient.Op{op}}
			err := f.cl.Execute(ctx, b)
			if op.Err != nil {
				err = op.Err // the canonical error, for the reply
			}
			if err != nil {
				s.log.LogAttrs(ctx, slog.LevelWarn, "flush_all failed", slog.String("table", f.t.FullName()), slog.Any("error", err))
				if first == nil {
					first = err
				}
			}
		}
	}
	return first
}

// RouteOf returns the route that serves container name: the first route, by
// longest prefix, that maps to it. A KV request pinned to it sees the same rows
// the memcache port sees under that prefix.
func (s *Service) RouteOf(name string) (*Route, bool) {
	routes := s.routing.Load().router.routes
	for i := range routes {
		if routes[i].Refused == nil && routes[i].Container.Name == name {
			return &routes[i], true
		}
	}
	return nil, false
}

// Run does r and waits for it: for front ends with a goroutine per request
// (HTTP, gRPC). r.Done is replaced.
func (s *Service) Run(r *Request) {
	ch := make(chan struct{})
	r.Done = func(*Request) { close(ch) }
	r.Lone = true // the caller waits for it
	s.Do(r)
	<-ch
}

// Crowded reports whether the backend's dispatcher is crowded: 4,096 ops
// in flight, or half its room if less (ndbclient.Client.Crowded).
func (s *Service) Crowded() bool { return s.backend.Crowded() }

// DriverStats sums the engine figures of the backend and the local cache.
func (s *Service) DriverStats() ndbclient.DriverStats {
	st := s.backend.Driver().Stats()
	if s.local != nil && s.local != s.backend {
		l := s.local.Driver().Stats()
		st.Items += l.Items
		st.Bytes += l.Bytes
		st.LimitBytes += l.LimitBytes
		st.Evictions += l.Evictions
		st.Expired += l.Expired
		st.ExpiredOnAccess += l.ExpiredOnAccess
		st.OutOfMemory += l.OutOfMemory
	}
	return st
}
