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

	"github.com/prometheus/client_golang/prometheus"
)

// Shards is the number of shards every family has: one per P, and one more
// for callers with no event loop (goroutine-per-connection listeners, REST,
// gRPC). Callers pass any shard number; it is taken modulo Shards.
var Shards = runtime.GOMAXPROCS(0) + 1

// SharedShard is the shard for callers with no event loop of their own.
func SharedShard() int { return Shards - 1 }

// cacheLine separates shards, so that two shards never share a line.
const cacheLine = 64

// cells is one family's counters for all its shards. Shard i owns
// v[i*stride : i*stride+width]. The stride is rounded up to whole cache lines
// and one line is left before the first shard.
type cells struct {
	v      []atomic.Uint64
	width  int
	stride int
}

func newCells(width int) cells {
	per := cacheLine / 8
	stride := (width + per - 1) / per * per
	return cells{v: make([]atomic.Uint64, per+Shards*stride), width: width, stride: stride}
}

func (c *cells) at(shard, i int) *atomic.Uint64 {
	return &c.v[cacheLine/8+(shard%Shards)*c.stride+i]
}

// sum adds cell i over every shard.
func (c *cells) sum(i int) uint64 {
	var n uint64
	for s := 0; s < Shards; s++ {
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
		c.c.v[i].Store(0)
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

// Value is child's total over all shards.
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
func (h *HistogramVec) Observe(shard, child int, d int64) {
	b := 0
	for b < len(h.limits) && d > h.limits[b] {
		b++
	}
	base := child * (h.buckets + 1)
	h.c.at(shard, base+b).Add(1)
	h.c.at(shard, base+h.buckets).Add(uint64(max(d, 0)))
}

// Count is child's number of observations over all shards.
func (h *HistogramVec) Count(child int) uint64 {
	var n uint64
	for b := 0; b < h.buckets; b++ {
		n += h.c.sum(child*(h.buckets+1) + b)
	}
	return n
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
