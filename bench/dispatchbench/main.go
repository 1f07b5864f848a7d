// Command dispatchbench measures the backend dispatcher on the embedded engine
// with simulated data nodes and a simulated round-trip delay: how many round
// trips a multi-get costs, and what coalescing does for many concurrent
// single-key clients. A benchmark, not a test: it prints figures and ratios.
//
//	go run ./bench/dispatchbench                       # 4 nodes, 100us round trip
//	go run ./bench/dispatchbench -rtt 200us -clients 128
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
)

func main() {
	rtt := flag.Duration("rtt", 100*time.Microsecond, "simulated round trip of each flight")
	nodes := flag.Int("nodes", 4, "simulated data nodes")
	keys := flag.Int("keys", 100, "keys per multi-get")
	clients := flag.Int("clients", 64, "concurrent single-key clients")
	dur := flag.Duration("time", 3*time.Second, "duration of each throughput run")
	trials := flag.Int("trials", 2, "alternating trials of coalescing on/off")
	flag.IntVar(trials, "rounds", 2, "the old name of -trials")
	flag.Parse()

	e := embedded.New(embedded.Config{Partitions: 16, Nodes: *nodes, ReapInterval: -1, RoundTripDelay: *rtt})
	defer e.Close()
	tbl, err := e.CreateTable(&ndbclient.Table{
		Database: "bench", Name: "kv", ExpireColumn: -1, PrimaryKey: []int{0},
		Columns: []ndbclient.Column{
			{Name: "k", Type: ndbclient.TypeVarchar, Length: 64},
			{Name: "v", Type: ndbclient.TypeVarbinary, Length: 64},
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	const total = 10000
	var fill ndbclient.Batch
	for i := 0; i < total; i++ {
		fill.Ops = append(fill.Ops, &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl,
			Key: []ndbclient.Value{ndbclient.String(fmt.Sprintf("key:%d", i))},
			Set: []ndbclient.ColumnValue{{Column: 1, Value: ndbclient.String("value-0123456789abcdef")}}})
	}
	_ = e.Execute(context.Background(), &fill)

	fmt.Printf("embedded engine: %d simulated nodes, simulated round trip %v\n\n", *nodes, *rtt)

	// 1. A multi-get of N keys: its latency in round trips. Go timers round a
	// sleeping runtime's sub-millisecond waits up, so the round trip actually
	// realised is measured too, as the latency of a one-key get.
	c := ndbclient.NewClientWith(e, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
	measure := func(n int) (p50, p99 time.Duration) {
		var lat []time.Duration
		for i := 0; i < 200; i++ {
			var b ndbclient.Batch
			for j := 0; j < n; j++ {
				b.Ops = append(b.Ops, &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Read: []int{1},
					Key: []ndbclient.Value{ndbclient.String(fmt.Sprintf("key:%d", (i*n+j)%total))}})
			}
			start := time.Now()
			if err := c.Execute(context.Background(), &b); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			lat = append(lat, time.Since(start))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return lat[len(lat)/2], lat[len(lat)*99/100]
	}
	one50, _ := measure(1)
	p50, p99 := measure(*keys)
	fmt.Printf("one-key get (one round trip as realised): p50 %v\n", one50.Round(time.Microsecond))
	fmt.Printf("multi-get of %d keys over %d nodes: p50 %v = %.2f round trips (p99 %v = %.2f)\n\n",
		*keys, *nodes, p50.Round(time.Microsecond), float64(p50)/float64(one50), p99.Round(time.Microsecond), float64(p99)/float64(one50))

	// 2. Concurrent single-key clients, coalescing on and off, alternated.
	run := func(coalesce bool) float64 {
		c := ndbclient.NewClientWith(e, ndbclient.DispatchConfig{Lanes: true, Coalesce: coalesce})
		var ops atomic.Int64
		var wg sync.WaitGroup
		stop := time.Now().Add(*dur)
		for g := 0; g < *clients; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				op := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Read: []int{1}}
				b := ndbclient.Batch{Ops: []*ndbclient.Op{op}}
				ch := make(chan struct{}, 1)
				done := func(*ndbclient.Batch, error) { ch <- struct{}{} }
				for i := g; time.Now().Before(stop); i += *clients {
					op.Key = append(op.Key[:0], ndbclient.String(fmt.Sprintf("key:%d", i%total)))
					op.Err, op.Row = nil, op.Row[:0]
					c.Submit(&b, done)
					<-ch
					ops.Add(1)
				}
			}(g)
		}
		wg.Wait()
		return float64(ops.Load()) / dur.Seconds()
	}
	fmt.Printf("%d concurrent single-key clients, %v per run:\n", *clients, *dur)
	fmt.Printf("%6s %16s %16s %8s\n", "trial", "coalesce ops/s", "no-coalesce ops/s", "ratio")
	var ratios []float64
	for r := 1; r <= *trials; r++ {
		on := run(true)
		off := run(false)
		ratios = append(ratios, on/off)
		fmt.Printf("%6d %16.0f %16.0f %8.1f\n", r, on, off, on/off)
	}
	sort.Float64s(ratios)
	fmt.Printf("coalescing speed-up: median %.1fx\n", ratios[len(ratios)/2])
}
