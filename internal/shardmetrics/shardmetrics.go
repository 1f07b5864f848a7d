// Package shardmetrics provides Prometheus counter and histogram families for
// the per-request hot path. Each family keeps one shard per event loop, so
// loops on different cores never write the same cache line. A scrape adds the
// shards up.
//
// The children (label value sets) are fixed when the family is made, as the
// hot path resolves them once. A child is a small index, and an update is one
// or two uncontended atomic adds.
package shardmetrics

import (
	"math"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
)

// shards is the number of shards every family has: shard 0 for callers with
// no event loop of their own (goroutine-per-connection listeners, REST, gRPC,
// background work), so that a zero shard number means "shared", and then one
// per event loop. The epoll transport runs a loop per processor and gnet one
// per CPU; Go runs at most GOMAXPROCS of them at once. Callers pass any shard number; it is taken modulo shards.
var shards = max(runtime.NumCPU(), runtime.GOMAXPROCS(0)) + 1

// SharedShard is the shard for callers with no event loop of their own: the
// zero value of a shard number.
const SharedShard = 0

// LoopShard is the shard of event loop n (counted from 0).
func LoopShard(n int) int { return 1 + n%(shards-1) }

// NumShards is the number of shards every family has.
func NumShards() int { return shards }

// cacheLine separates shards, so that two shards never share a line.
const cacheLine = 64

// cells is one family's counters for all its shards. Shard s owns
// v[base+s*stride:][:width]; the stride is a whole number of cache lines and
// base puts v[base] at the start of a line, so no two shards share one.
type cells struct {
	v      []atomic.Uint64
	base   int
	stride int
}

func newCells(width int) cells {
	const per = cacheLine / 8
	stride := (width + per - 1) / per * per
	v := make([]atomic.Uint64, per+shards*stride) // one spare line for alignment
	base := 0
	if off := uintptr(unsafe.Pointer(&v[0])) % cacheLine; off != 0 {
		base = int(cacheLine-off) / 8
	}
	return cells{v: v, base: base, stride: stride}
}

func (c *cells) at(shard, i int) *atomic.Uint64 {
	return &c.v[c.base+int(uint(shard)%uint(shards))*c.stride+i]
}

// sum adds cell i over every shard.
func (c *cells) sum(i int) uint64 {
	var n uint64
	for s := 0; s < shards; s++ {
		n += c.at(s, i).Load()
	}
	return n
}

// Counters is a fixed set of sharded counters outside Prometheus, for figures
// such as memcached's "stats".
type Counters struct{ c cells }

// NewCounters makes n counters.
func NewCounters(n int) *Counters { return &Counters{c: newCells(n)} }

// Add adds n to counter i on shard.
func (c *Counters) Add(shard, i int, n uint64) { c.c.at(shard, i).Add(n) }

// Value is counter i's total over all shards.
func (c *Counters) Value(i int) uint64 { return c.c.sum(i) }

// Reset zeroes every counter. Adds racing with it may survive.
func (c *Counters) Reset() {
	for i := range c.c.v {
		c.c.v[i].Store(0) // the padding too: it is always zero
	}
}

// CounterVec is a counter family with fixed children.
type CounterVec struct {
	desc   *prometheus.Desc
	labels [][]string
	c      cells
}

// NewCounterVec makes a counter family. Child i has the label values
// children[i], in the order of variableLabels.
func NewCounterVec(name, help string, variableLabels []string, constLabels prometheus.Labels, children [][]string) *CounterVec {
	return &CounterVec{
		desc:   prometheus.NewDesc(name, help, variableLabels, constLabels),
		labels: children,
		c:      newCells(len(children)),
	}
}

// Add adds n to child on shard.
func (v *CounterVec) Add(shard, child int, n uint64) { v.c.at(shard, child).Add(n) }

// Value is child's sum over the shards.
func (v *CounterVec) Value(child int) uint64 { return v.c.sum(child) }

// Describe implements prometheus.Collector.
func (v *CounterVec) Describe(ch chan<- *prometheus.Desc) { ch <- v.desc }

// Collect implements prometheus.Collector.
func (v *CounterVec) Collect(ch chan<- prometheus.Metric) {
	for i, lv := range v.labels {
		ch <- prometheus.MustNewConstMetric(v.desc, prometheus.CounterValue, float64(v.c.sum(i)), lv...)
	}
}

// HistogramVec is a histogram family with fixed children over integer
// observations: the hot path observes in a small unit (nanoseconds, say), and
// the family exports in a larger one (seconds). It keeps, per child, a count
// per bucket and the sum.
type HistogramVec struct {
	desc    *prometheus.Desc
	labels  [][]string
	bounds  []float64 // upper bounds as exported
	limits  []int64   // the same in observed units, for the hot path
	unit    float64   // observed units per exported unit
	buckets int       // len(bounds)+1: the last is +Inf
	c       cells     // per child: buckets counts, then the sum
}

// NewHistogramVec makes a histogram family over the given bucket upper bounds
// (ascending, in exported units). Observations are in 1/unit of that: unit is
// 1e9 for a family in seconds observed in nanoseconds.
func NewHistogramVec(name, help string, bounds []float64, unit float64, variableLabels []string, constLabels prometheus.Labels, children [][]string) *HistogramVec {
	h := &HistogramVec{
		desc:    prometheus.NewDesc(name, help, variableLabels, constLabels),
		labels:  children,
		bounds:  bounds,
		unit:    unit,
		buckets: len(bounds) + 1,
	}
	for _, b := range bounds {
		h.limits = append(h.limits, int64(math.Round(b*unit)))
	}
	h.c = newCells(len(children) * (h.buckets + 1))
	return h
}

// Observe records the value d (in observed units) for child on shard.
func (h *HistogramVec) Observe(shard, child int, d int64) { h.ObserveN(shard, child, d, 1) }

// ObserveN records the value d n times, for n events that took as long.
func (h *HistogramVec) ObserveN(shard, child int, d int64, n uint64) {
	b := 0
	for b < len(h.limits) && d > h.limits[b] {
		b++
	}
	base := child * (h.buckets + 1)
	h.c.at(shard, base+b).Add(n)
	h.c.at(shard, base+h.buckets).Add(uint64(max(d, 0)) * n)
}

// Describe implements prometheus.Collector.
func (h *HistogramVec) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

// Collect implements prometheus.Collector.
func (h *HistogramVec) Collect(ch chan<- prometheus.Metric) {
	for i, lv := range h.labels {
		base := i * (h.buckets + 1)
		cum := make(map[float64]uint64, len(h.bounds))
		var n uint64
		for b, ub := range h.bounds {
			n += h.c.sum(base + b)
			cum[ub] = n
		}
		n += h.c.sum(base + len(h.bounds))
		sum := float64(h.c.sum(base+h.buckets)) / h.unit
		ch <- prometheus.MustNewConstHistogram(h.desc, n, sum, cum, lv...)
	}
}
