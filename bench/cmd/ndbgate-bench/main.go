// Command ndbgate-bench is a load generator for every ndbgate front end:
// memcache text and binary, REST (RonDB pk-read and batch, KV) and gRPC (KV
// and RonDBREST), with the same knobs for each, HDR latency histograms, a live
// progress line and a JSON report. It needs nothing installed.
//
//	ndbgate-bench -proto memcache-text -addr 127.0.0.1:11211 -conns 50 -duration 10s
//	ndbgate-bench -proto rest-batch -addr 127.0.0.1:4406 -batch 100 -server-pid $(pgrep ndbgate)
//
// Key i is "<prefix><i>" with prefix "memtier-", so memtier_benchmark and this
// tool share a key space.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// config is every knob, shared by all protocols.
type config struct {
	proto, addr            string
	conns, pipeline, batch int
	valueSize, keys        int
	sets, gets             int
	duration, warmup       time.Duration
	preload                bool
	keyPrefix              string
	db, table              string
	keyColumn, valueColumn string
	container, apiKey      string
	serverPID              int
	jsonOut                string
	quiet                  bool
}

// client is one connection's worth of a protocol. Calls on one client come
// from one goroutine at a time.
type client interface {
	// get reads keys (one batch when len(keys) > 1) and returns the hits.
	get(ctx context.Context, keys []string) (hits int, err error)
	set(ctx context.Context, key string, value []byte) error
	close() error
}

// dialer makes the clients of one protocol; lanes is how many goroutines
// share a connection (the pipeline depth for protocols that multiplex).
type dialer func(cfg *config) (client, error)

var protocols = map[string]struct {
	dial dialer
	// pipelined: the client itself keeps -pipeline requests in flight on one
	// connection; otherwise -pipeline goroutines each use their own client
	// over a shared transport.
	pipelined bool
}{
	"memcache-text":   {dial: dialMemcacheText, pipelined: true},
	"memcache-binary": {dial: dialMemcacheBinary, pipelined: true},
	"rest-pkread":     {dial: dialREST("pkread")},
	"rest-batch":      {dial: dialREST("batch")},
	"rest-kv":         {dial: dialREST("kv")},
	"grpc-kv":         {dial: dialGRPC("kv")},
	"grpc-rondb":      {dial: dialGRPC("rondb")},
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "ndbgate-bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, cfg, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ndbgate-bench:", err)
		os.Exit(1)
	}
	if err := writeReport(cfg, rep); err != nil {
		fmt.Fprintln(os.Stderr, "ndbgate-bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("ndbgate-bench", flag.ContinueOnError)
	var names []string
	for n := range protocols {
		names = append(names, n)
	}
	fs.StringVar(&c.proto, "proto", "memcache-text", "protocol: "+strings.Join(sortedStrings(names), ", "))
	fs.StringVar(&c.addr, "addr", "", "host:port (default: the protocol's ndbgate port)")
	fs.IntVar(&c.conns, "conns", 8, "connections")
	fs.IntVar(&c.pipeline, "pipeline", 1, "requests in flight per connection")
	fs.IntVar(&c.batch, "batch", 1, "keys per read: a multi-get, a batch of pk-reads, a MultiGet")
	fs.IntVar(&c.valueSize, "value-size", 32, "bytes per value")
	fs.IntVar(&c.keys, "keys", 100000, "key space: keys 1..N")
	ratio := fs.String("ratio", "1:10", "set:get ratio, as memtier's --ratio")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured run time")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "unmeasured run time first")
	fs.BoolVar(&c.preload, "preload", false, "write every key once before the run")
	fs.StringVar(&c.keyPrefix, "key-prefix", "memtier-", "key prefix")
	fs.StringVar(&c.db, "db", "ndbmemcache", "REST/RonDB: database")
	fs.StringVar(&c.table, "table", "demo_table", "REST/RonDB: table")
	fs.StringVar(&c.keyColumn, "key-column", "mkey", "REST/RonDB: key column")
	fs.StringVar(&c.valueColumn, "value-column", "string_value", "REST/RonDB: value column")
	fs.StringVar(&c.container, "container", "default", "KV: container")
	fs.StringVar(&c.apiKey, "api-key", "", "REST/gRPC: API key")
	fs.IntVar(&c.serverPID, "server-pid", 0, "report the CPU seconds this process (the gateway) used during the run")
	fs.StringVar(&c.jsonOut, "json", "", "write the JSON report to this file ('-' for stdout)")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress line")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if _, ok := protocols[c.proto]; !ok {
		return nil, fmt.Errorf("-proto %q: use one of %s", c.proto, strings.Join(sortedStrings(names), ", "))
	}
	s, g, ok := strings.Cut(*ratio, ":")
	var err1, err2 error
	c.sets, err1 = strconv.Atoi(s)
	c.gets, err2 = strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil || c.sets < 0 || c.gets < 0 || c.sets+c.gets == 0 {
		return nil, fmt.Errorf("-ratio %q: want SETS:GETS, e.g. 1:10", *ratio)
	}
	if c.conns < 1 || c.pipeline < 1 || c.batch < 1 || c.keys < 1 || c.valueSize < 0 || c.duration <= 0 {
		return nil, errors.New("-conns, -pipeline, -batch and -keys must be at least 1, -duration positive")
	}
	if c.addr == "" {
		switch {
		case strings.HasPrefix(c.proto, "memcache"):
			c.addr = "127.0.0.1:11211"
		case strings.HasPrefix(c.proto, "rest"):
			c.addr = "127.0.0.1:4406"
		default:
			c.addr = "127.0.0.1:5406"
		}
	}
	return c, nil
}

func sortedStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// report is the JSON output.
type report struct {
	Proto     string  `json:"proto"`
	Addr      string  `json:"addr"`
	Conns     int     `json:"conns"`
	Pipeline  int     `json:"pipeline"`
	Batch     int     `json:"batch"`
	ValueSize int     `json:"value_size"`
	Keys      int     `json:"keys"`
	Ratio     string  `json:"ratio"`
	Duration  float64 `json:"duration_s"`
	Ops       int64   `json:"ops"`
	OpsPerSec float64 `json:"ops_per_s"`
	KeysRead  int64   `json:"keys_read"`
	KeysPerS  float64 `json:"keys_per_s"`
	Hits      int64   `json:"hits"`
	Misses    int64   `json:"misses"`
	Errors    int64   `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
	Latency   struct {
		P50, P90, P99, P999, Max, Mean float64
	} `json:"latency_us"`
	CPU struct {
		UserS float64 `json:"user_s"`
		SysS  float64 `json:"sys_s"`
	} `json:"cpu"`
	Server *struct {
		CPUS              float64 `json:"cpu_s"`
		KeysPerCPUSecond  float64 `json:"keys_per_cpu_s"`
		OpsPerCPUSecond   float64 `json:"ops_per_cpu_s"`
		CPUPerKeyMicrosec float64 `json:"cpu_us_per_key"`
	} `json:"server,omitempty"`
}

// stats are one worker's counts; merged at the end.
type stats struct {
	ops, keysRead, hits, errors int64
	hist                        *hdrhistogram.Histogram
	firstErr                    error
}

func newStats() *stats { return &stats{hist: hdrhistogram.New(1, 60_000_000, 3)} }

func run(ctx context.Context, cfg *config, progress io.Writer) (*report, error) {
	p := protocols[cfg.proto]
	// One client per connection for pipelined protocols; otherwise one per
	// in-flight request, sharing the protocol's connection pool.
	nclients := cfg.conns
	if !p.pipelined {
		nclients = cfg.conns * cfg.pipeline
	}
	clients := make([]client, 0, nclients)
	defer func() {
		for _, c := range clients {
			_ = c.close()
		}
	}()
	for i := 0; i < nclients; i++ {
		c, err := p.dial(cfg)
		if err != nil {
			return nil, fmt.Errorf("connect %s (%s): %w", cfg.addr, cfg.proto, err)
		}
		clients = append(clients, c)
	}
	value := []byte(strings.Repeat("x", cfg.valueSize))
	if cfg.preload {
		if err := preload(ctx, cfg, clients, value); err != nil {
			return nil, err
		}
	}

	var measuring, stopping atomic.Bool
	var liveOps atomic.Int64
	all := make([]*stats, len(clients))
	// Requests run without a deadline (a gRPC deadline can fire on the server
	// first and fail requests that were fine); workers stop between requests.
	runCtx, cancel := context.WithTimeout(ctx, cfg.warmup+cfg.duration)
	defer cancel()
	var wg sync.WaitGroup
	for i, c := range clients {
		st := newStats()
		all[i] = st
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			work(ctx, cfg, c, st, value, seed, &measuring, &stopping, &liveOps)
		}(uint64(i) + 1)
	}
	if cfg.warmup > 0 {
		select {
		case <-time.After(cfg.warmup):
		case <-runCtx.Done():
		}
	}
	cpu0, srv0 := selfCPU(), serverCPU(cfg.serverPID)
	measuring.Store(true)
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	showProgress := !cfg.quiet && isTerminal(progress)
	for done := false; !done; {
		select {
		case <-runCtx.Done():
			done = true
		case <-tick.C:
			if showProgress {
				el := time.Since(start).Seconds()
				fmt.Fprintf(progress, "\r%s %5.0fs  %10.0f ops/s   ", cfg.proto, el, float64(liveOps.Load())/el)
			}
		}
	}
	measuring.Store(false)
	elapsed := time.Since(start)
	cpu1, srv1 := selfCPU(), serverCPU(cfg.serverPID)
	stopping.Store(true)
	wg.Wait()
	if showProgress {
		fmt.Fprintln(progress)
	}

	rep := &report{Proto: cfg.proto, Addr: cfg.addr, Conns: cfg.conns, Pipeline: cfg.pipeline, Batch: cfg.batch,
		ValueSize: cfg.valueSize, Keys: cfg.keys, Ratio: fmt.Sprintf("%d:%d", cfg.sets, cfg.gets), Duration: elapsed.Seconds()}
	h := hdrhistogram.New(1, 60_000_000, 3)
	for _, st := range all {
		rep.Ops += st.ops
		rep.KeysRead += st.keysRead
		rep.Hits += st.hits
		rep.Errors += st.errors
		if st.firstErr != nil && rep.FirstErr == "" {
			rep.FirstErr = st.firstErr.Error()
		}
		h.Merge(st.hist)
	}
	rep.Misses = rep.KeysRead - rep.Hits
	rep.OpsPerSec = float64(rep.Ops) / elapsed.Seconds()
	rep.KeysPerS = float64(rep.KeysRead) / elapsed.Seconds()
	rep.Latency.P50 = float64(h.ValueAtQuantile(50))
	rep.Latency.P90 = float64(h.ValueAtQuantile(90))
	rep.Latency.P99 = float64(h.ValueAtQuantile(99))
	rep.Latency.P999 = float64(h.ValueAtQuantile(99.9))
	rep.Latency.Max = float64(h.Max())
	rep.Latency.Mean = h.Mean()
	rep.CPU.UserS, rep.CPU.SysS = cpu1.user-cpu0.user, cpu1.sys-cpu0.sys
	if cfg.serverPID > 0 && srv0 >= 0 && srv1 >= 0 {
		rep.Server = &struct {
			CPUS              float64 `json:"cpu_s"`
			KeysPerCPUSecond  float64 `json:"keys_per_cpu_s"`
			OpsPerCPUSecond   float64 `json:"ops_per_cpu_s"`
			CPUPerKeyMicrosec float64 `json:"cpu_us_per_key"`
		}{CPUS: srv1 - srv0}
		if rep.Server.CPUS > 0 {
			rep.Server.KeysPerCPUSecond = float64(rep.KeysRead) / rep.Server.CPUS
			rep.Server.OpsPerCPUSecond = float64(rep.Ops) / rep.Server.CPUS
		}
		if rep.KeysRead > 0 {
			rep.Server.CPUPerKeyMicrosec = rep.Server.CPUS * 1e6 / float64(rep.KeysRead)
		}
	}
	if rep.Ops == 0 {
		return rep, fmt.Errorf("no request completed (first error: %s)", rep.FirstErr)
	}
	return rep, nil
}

// work runs requests on one client until ctx ends.
func work(ctx context.Context, cfg *config, c client, st *stats, value []byte, seed uint64, measuring, stopping *atomic.Bool, live *atomic.Int64) {
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	keys := make([]string, cfg.batch)
	total := cfg.sets + cfg.gets
	for ctx.Err() == nil && !stopping.Load() {
		isSet := rng.IntN(total) < cfg.sets
		start := time.Now()
		var err error
		hits, nkeys := 0, 0
		if isSet {
			err = c.set(ctx, cfg.key(rng.IntN(cfg.keys)+1), value)
		} else {
			for i := range keys {
				keys[i] = cfg.key(rng.IntN(cfg.keys) + 1)
			}
			hits, err = c.get(ctx, keys)
			nkeys = len(keys)
		}
		if ctx.Err() != nil || !measuring.Load() {
			continue
		}
		if err != nil {
			st.errors++
			if st.firstErr == nil {
				st.firstErr = err
			}
			continue
		}
		st.ops++
		st.keysRead += int64(nkeys)
		st.hits += int64(hits)
		live.Add(1)
		_ = st.hist.RecordValue(max(time.Since(start).Microseconds(), 1))
	}
}

func (c *config) key(i int) string { return c.keyPrefix + strconv.Itoa(i) }

// preload writes every key once, spread over the clients.
func preload(ctx context.Context, cfg *config, clients []client, value []byte) error {
	var next atomic.Int64
	errc := make(chan error, len(clients))
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func(c client) {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(cfg.keys) || ctx.Err() != nil {
					return
				}
				if err := c.set(ctx, cfg.key(int(i)), value); err != nil {
					errc <- fmt.Errorf("preload %s: %w", cfg.key(int(i)), err)
					return
				}
			}
		}(c)
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

type cpuTimes struct{ user, sys float64 }

func selfCPU() cpuTimes {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return cpuTimes{user: float64(ru.Utime.Nano()) / 1e9, sys: float64(ru.Stime.Nano()) / 1e9}
}

// serverCPU is another process's user+system CPU seconds, from /proc (-1 if
// unknown).
func serverCPU(pid int) float64 {
	if pid <= 0 {
		return -1
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// Fields after the command name (which may hold spaces, in parentheses).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return -1
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	stt, _ := strconv.ParseFloat(f[12], 64)
	const clockTicks = 100 // USER_HZ on Linux
	return (ut + stt) / clockTicks
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func writeReport(cfg *config, rep *report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	switch cfg.jsonOut {
	case "":
		fmt.Printf("%s %s conns=%d pipeline=%d batch=%d: %.0f ops/s, %.0f keys/s, p50 %.0f us, p99 %.0f us, p99.9 %.0f us, errors %d\n",
			rep.Proto, rep.Addr, rep.Conns, rep.Pipeline, rep.Batch, rep.OpsPerSec, rep.KeysPerS,
			rep.Latency.P50, rep.Latency.P99, rep.Latency.P999, rep.Errors)
		if rep.Server != nil {
			fmt.Printf("server: %.2f CPU s, %.0f keys per CPU second (%.2f us/key)\n", rep.Server.CPUS, rep.Server.KeysPerCPUSecond, rep.Server.CPUPerKeyMicrosec)
		}
		return nil
	case "-":
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(cfg.jsonOut, b, 0o644)
}
