package lin

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ndbgate/ndbgate/tests/internal/ndbproc"
)

// TestSoak is the long run, by hand: NDBGATE_LIN_SOAK=1h runs mixed load on
// one gateway (the embedded engine with --data-dir --fsync always, or the
// live cluster), with a fault every NDBGATE_LIN_SOAK_FAULT_EVERY (5m):
// embedded, kill -9 of the gateway; live, a data node killed, then the
// gateway killed, in turn. Each fault interval is a window of its own keys
// whose history is checked. Every 10 s it samples the gateway's RSS,
// goroutines and open files and the latency percentiles of the last 10 s,
// into NDBGATE_LIN_SOAK_CSV. It fails on any history that is not
// linearizable, and on RSS, goroutines or open files that keep growing: the
// last window's peak may not pass the second window's by more than half
// (RSS) or by more than 20 (goroutines, files).
func TestSoak(t *testing.T) {
	total, err := time.ParseDuration(os.Getenv("NDBGATE_LIN_SOAK"))
	if err != nil || total <= 0 {
		t.Skip("the soak runs by hand: NDBGATE_LIN_SOAK=1h")
	}
	every := 5 * time.Minute
	if d, err := time.ParseDuration(os.Getenv("NDBGATE_LIN_SOAK_FAULT_EVERY")); err == nil && d > 0 {
		every = d
	}
	cs := liveCluster()
	if cs != "" {
		liveFaults(t)
		createLiveTables(t, cs)
	}
	var g *gateway
	if cs == "" {
		g = startGateway(t, "--data-dir", t.TempDir(), "--fsync", "always")
	} else {
		g = startGateway(t)
	}
	out := os.Getenv("NDBGATE_LIN_SOAK_CSV")
	if out == "" {
		out = filepath.Join(t.TempDir(), "soak.csv")
	}
	csv, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer csv.Close()
	fmt.Fprintln(csv, "seconds,window,rss_mib,goroutines,open_fds,ops,p50_ms,p99_ms,p999_ms,failed")
	began := time.Now()
	var peaks []sample // per window
	for w := 0; time.Since(began) < total; w++ {
		rec := NewRecorder()
		load := Workload{Keys: keys(8), Weights: DefaultWeights, Pause: 5 * time.Millisecond}
		cs2 := clients([]*gateway{g}, 4, 2, liveOpTimeout)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { load.Run(ctx, rec, 0, cs2); close(done) }()
		end := time.Now().Add(min(every, total-time.Since(began)))
		faultAt := time.Now().Add(time.Until(end) / 2)
		faulted := false
		var faultRec int64 // when the fault began, on rec's clock
		var peak sample
		var lastSample int64
		for time.Now().Before(end) {
			time.Sleep(10 * time.Second)
			if !faulted && time.Now().After(faultAt) {
				faulted, faultRec = true, rec.Now()
				soakFault(t, g, cs, w)
			}
			s := sampleOf(g)
			now := rec.Now()
			lat, failed := latencies(rec, lastSample, now)
			lastSample = now
			peak = peak.max(s)
			fmt.Fprintf(csv, "%.0f,%d,%.1f,%d,%d,%d,%.3f,%.3f,%.3f,%d\n", time.Since(began).Seconds(), w,
				float64(s.rss)/(1<<20), s.goroutines, s.fds, len(lat), pct(lat, 0.5), pct(lat, 0.99), pct(lat, 0.999), failed)
		}
		cancel()
		<-done
		finalReads(rec, len(cs2), []*gateway{g}, load.Keys, liveOpTimeout)
		h := rec.History()
		v := Check(h, checkTimeout)
		sum := Summarize(h)
		t.Logf("window %d: %d operations, %d ambiguous, %s; peak RSS %.1f MiB, %d goroutines, %d fds; %v",
			w, sum.Ops, sum.Ambiguous, errorWindow(rec, faultRec), float64(peak.rss)/(1<<20), peak.goroutines, peak.fds, v.Result)
		if v.Result != porcupine.Ok || len(rec.Errors()) > 0 {
			mustBeLinearizable(t, rec) // reports and fails
		}
		peaks = append(peaks, peak)
	}
	t.Logf("samples in %s", out)
	if len(peaks) >= 3 {
		base, last := peaks[1], peaks[len(peaks)-1]
		if float64(last.rss) > 1.5*float64(base.rss) || last.goroutines > base.goroutines+20 || last.fds > base.fds+20 {
			t.Errorf("resources grew: window 1 peaked at %+v, the last at %+v", base, last)
		}
	}
}

// soakFault breaks something for window w and waits until it has healed.
func soakFault(t *testing.T, g *gateway, cs string, w int) {
	if cs == "" || w%2 == 1 {
		g.kill9()
		g.start()
		return
	}
	if err := ndbproc.KillDataNode(cs, 1+(w/2)%2, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
}

type sample struct{ rss, goroutines, fds int64 }

func (s sample) max(o sample) sample {
	return sample{max(s.rss, o.rss), max(s.goroutines, o.goroutines), max(s.fds, o.fds)}
}

// sampleOf reads the gateway's own metrics: resident memory, goroutines and
// open files.
func sampleOf(g *gateway) sample {
	var s sample
	scrapeMetrics(g, func(name, _ string, v float64) {
		switch name {
		case "process_resident_memory_bytes":
			s.rss = int64(v)
		case "go_goroutines":
			s.goroutines = int64(v)
		case "process_open_fds":
			s.fds = int64(v)
		}
	})
	return s
}

// scrapeMetrics reads g's /metrics and calls each with every sample: its
// name, its labels as written ("" without), its value. false when the
// gateway did not answer in full.
func scrapeMetrics(g *gateway, each func(name, labels string, v float64)) bool {
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + g.rest + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		name, labels, _ := strings.Cut(line[:sp], "{")
		each(name, labels, v)
	}
	return sc.Err() == nil
}

// latencies are the durations of the operations that returned in [from,
// to), sorted, and how many failed in it.
func latencies(rec *Recorder, from, to int64) ([]time.Duration, int) {
	var lat []time.Duration
	for _, op := range rec.History() {
		if op.Return != never && op.Return >= from && op.Return < to {
			lat = append(lat, time.Duration(op.Return-op.Call))
		}
	}
	failed := 0
	for _, at := range rec.Failures() {
		if at >= from && at < to {
			failed++
		}
	}
	slices.Sort(lat)
	return lat, failed
}

func pct(lat []time.Duration, q float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / float64(time.Millisecond)
}
