//go:build ndbapi

package ndb

// Fault tests: they kill and restart parts of the cluster named by
// NDBGATE_TEST_CONNECTSTRING, so they run only with NDBGATE_TEST_FAULTS=1 as
// well. They need ndb_mgm on PATH, the cluster's processes on this machine
// (found through /proc), data nodes started with --ndb-nodeid=N, and
// NoOfReplicas=2. A killed node is started again by its angel
// (StopOnError=0), or by the test when the angel gave up. Figures are logged
// (go test -v); what is asserted is that nothing acknowledged is lost and
// that service comes back.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/drivertest"
	"github.com/ndbgate/ndbgate/ndbclient/ndbapi"
	"github.com/ndbgate/ndbgate/tests/internal/ndbproc"
)

// faultCluster skips unless fault tests were asked for, and returns the
// connectstring.
func faultCluster(t *testing.T) string {
	cs := os.Getenv("NDBGATE_TEST_CONNECTSTRING")
	if cs == "" || os.Getenv("NDBGATE_TEST_FAULTS") != "1" {
		t.Skip("fault tests need NDBGATE_TEST_CONNECTSTRING and NDBGATE_TEST_FAULTS=1")
	}
	_, err := exec.LookPath("ndb_mgm")
	require.NoError(t, err, "ndb_mgm must be on PATH")
	return cs
}

// openClient opens a driver and a dispatcher over it, as ndbgate serve does,
// and an empty table of the suite's shape, ndbgate_test.faults (write loads
// fill DataMemory otherwise).
func openClient(t *testing.T, cs string) (*ndbapi.Driver, *ndbclient.Client, *ndbclient.Table) {
	d := openDriver(t, cs, 2)
	tbl := suiteTable(t, d, "faults", true)
	return d, ndbclient.NewClientWith(d, ndbclient.DispatchConfig{Lanes: true, Coalesce: true}), tbl
}

func mgm(t *testing.T, cs, command string) string { return ndbproc.Mgm(cs, command) }

// nodeStarted asks the management server whether data node id is started.
func nodeStarted(t *testing.T, cs string, id int) bool { return ndbproc.NodeStarted(cs, id) }

// writeLoad writes keys prefix<g>-<i> from workers goroutines until stop is
// closed, and returns every acknowledged key with its value, and the errors.
type loadResult struct {
	acked             map[string]string
	errs              int
	firstErr, lastErr time.Time
	codes             map[ndbclient.Code]int
	writes            int
	samples           []errorAt // the first errors, with when they came
}

type errorAt struct {
	at  time.Time
	err error
}

func writeLoad(c *ndbclient.Client, tbl *ndbclient.Table, prefix string, workers int, stop <-chan struct{}) *loadResult {
	res := &loadResult{acked: map[string]string{}, codes: map[ndbclient.Code]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("%s%d-%d", prefix, g, i)
				val := fmt.Sprintf("v%d", i)
				op := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: []ndbclient.Value{ndbclient.String(key)},
					Set: []ndbclient.ColumnValue{{Column: drivertest.ColValue, Value: ndbclient.String(val)}}}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := c.Execute(ctx, &ndbclient.Batch{Ops: []*ndbclient.Op{op}})
				cancel()
				if err == nil {
					err = op.Err
				}
				now := time.Now()
				mu.Lock()
				res.writes++
				if err == nil {
					res.acked[key] = val
				} else {
					if res.errs == 0 {
						res.firstErr = now
					}
					res.errs++
					res.lastErr = now
					res.codes[ndbclient.CodeOf(err)]++
					if len(res.samples) < 20 {
						res.samples = append(res.samples, errorAt{now, err})
					}
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}(g)
	}
	<-stop
	wg.Wait()
	return res
}

// lost reads every acknowledged key back and returns those missing or wrong.
func lost(t *testing.T, c *ndbclient.Client, tbl *ndbclient.Table, acked map[string]string) []string {
	var missing []string
	keys := make([]string, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	for start := 0; start < len(keys); start += 128 {
		end := min(start+128, len(keys))
		b := &ndbclient.Batch{}
		for _, k := range keys[start:end] {
			b.Ops = append(b.Ops, &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: []ndbclient.Value{ndbclient.String(k)}, Read: []int{drivertest.ColValue}})
		}
		require.NoError(t, c.Execute(context.Background(), b))
		for i, op := range b.Ops {
			k := keys[start+i]
			if op.Err != nil || len(op.Row) != 1 || string(op.Row[0].B) != acked[k] {
				missing = append(missing, fmt.Sprintf("%s (%v)", k, op.Err))
			}
		}
	}
	return missing
}

func TestOneDataNodeKilledUnderWriteLoad(t *testing.T) {
	cs := faultCluster(t)
	_, c, tbl := openClient(t, cs)
	victim := 2
	if v := os.Getenv("NDBGATE_TEST_KILL_NODE"); v != "" {
		victim, _ = strconv.Atoi(v)
	}
	require.True(t, nodeStarted(t, cs, victim), "node %d must be started", victim)
	stop := make(chan struct{})
	done := make(chan *loadResult)
	go func() { done <- writeLoad(c, tbl, fmt.Sprintf("kill%d-", time.Now().UnixNano()), 8, stop) }()
	time.Sleep(2 * time.Second)
	worker, angel, err := ndbproc.DataNode(victim)
	require.NoError(t, err)
	killedAt := time.Now()
	require.NoError(t, syscall.Kill(worker.PID, syscall.SIGKILL))
	// Write on through the node's absence and its restart.
	require.NoError(t, ndbproc.WaitRestarted(cs, victim, angel, 5*time.Minute))
	restarted := time.Since(killedAt)
	time.Sleep(2 * time.Second)
	close(stop)
	res := <-done
	missing := lost(t, c, tbl, res.acked)
	errs := "no errors"
	if res.errs > 0 {
		errs = fmt.Sprintf("%d errors %v over %v, the first %v after the kill", res.errs, res.codes,
			res.lastErr.Sub(res.firstErr).Round(time.Millisecond), res.firstErr.Sub(killedAt).Round(time.Millisecond))
	}
	t.Logf("kill -9 of data node %d: %d writes, %d acknowledged, %s; node back after %v; lost %d",
		victim, res.writes, len(res.acked), errs, restarted.Round(time.Second), len(missing))
	for _, e := range res.samples {
		t.Logf("  %v after the kill: %v", e.at.Sub(killedAt).Round(time.Millisecond), e.err)
	}
	require.Empty(t, missing, "acknowledged writes lost")
	require.NotEmpty(t, res.acked)
}

func TestEveryDataNodeRestarted(t *testing.T) {
	cs := faultCluster(t)
	d, c, tbl := openClient(t, cs)
	// The cluster counts as back when the management server says every data
	// node has started; a probe goroutine records when.
	var backAt time.Time
	var mu sync.Mutex
	probeStop := make(chan struct{})
	probeDone := make(chan struct{})
	out := mgm(t, cs, "all restart")
	require.Contains(t, out, "restarted", out)
	restartAt := time.Now()
	go func() {
		defer close(probeDone)
		time.Sleep(time.Second) // the restart has begun
		for {
			select {
			case <-probeStop:
				return
			default:
			}
			if ndbproc.AllStarted(cs, 2) {
				mu.Lock()
				backAt = time.Now()
				mu.Unlock()
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	key := fmt.Sprintf("restart-%d", time.Now().UnixNano())
	var firstFail, recovered time.Time
	var notReadySeen bool
	deadline := time.Now().Add(5 * time.Minute)
	for {
		require.True(t, time.Now().Before(deadline), "ndbgate did not recover within 5 minutes of the restart")
		if d.Ready() != nil {
			notReadySeen = true
		}
		op := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: []ndbclient.Value{ndbclient.String(key)},
			Set: []ndbclient.ColumnValue{{Column: drivertest.ColValue, Value: ndbclient.String("x")}}}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.Execute(ctx, &ndbclient.Batch{Ops: []*ndbclient.Op{op}})
		cancel()
		if err == nil {
			err = op.Err
		}
		if err != nil && firstFail.IsZero() {
			firstFail = time.Now()
		}
		if err == nil && !firstFail.IsZero() {
			recovered = time.Now()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	<-probeDone
	close(probeStop)
	mu.Lock()
	back := backAt
	mu.Unlock()
	require.True(t, notReadySeen, "Ready() never reported the outage")
	require.NoError(t, d.Ready())
	st := d.Stats()
	t.Logf("all data nodes restarted: writes failed from %v after the restart; the cluster was back (every node started) %v after it; ndbgate served again %v after it, %v after the cluster was back; connects %d",
		firstFail.Sub(restartAt).Round(time.Millisecond), back.Sub(restartAt).Round(time.Millisecond),
		recovered.Sub(restartAt).Round(time.Millisecond), recovered.Sub(back).Round(time.Millisecond), st.Connects)
	require.GreaterOrEqual(t, st.Connects, uint64(2))
}

func TestManagementServerDown(t *testing.T) {
	cs := faultCluster(t)
	_, c, tbl := openClient(t, cs)
	m, err := ndbproc.Management()
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(m.PID, syscall.SIGKILL))
	t.Cleanup(func() {
		require.NoError(t, ndbproc.StartLike(m))
		require.NoError(t, ndbproc.WaitManagement(cs, 30*time.Second))
	})
	stop := make(chan struct{})
	done := make(chan *loadResult)
	go func() { done <- writeLoad(c, tbl, fmt.Sprintf("mgmdown%d-", time.Now().UnixNano()), 4, stop) }()
	time.Sleep(5 * time.Second)
	close(stop)
	res := <-done
	t.Logf("management server down: %d writes, %d errors", res.writes, res.errs)
	require.Zero(t, res.errs, "writes failed while only the management server was down: %v", res.codes)
	require.Empty(t, lost(t, c, tbl, res.acked))
}

func TestTableDroppedAndRecreated(t *testing.T) {
	cs := faultCluster(t)
	_, c, _ := openClient(t, cs)
	// other changes the schema and describes nothing, as ndb-create-tables
	// does; c's driver serves the table.
	other := openDriver(t, cs, 1)
	want := drivertest.Table("ndbgate_test", "schema_change")
	_, err := other.DropNDBTable(want.Database, want.Name)
	require.NoError(t, err)
	_, err = other.CreateNDBTable(want)
	require.NoError(t, err)
	tbl, err := c.Driver().CreateTable(want)
	require.NoError(t, err)
	write := func() error {
		op := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: []ndbclient.Value{ndbclient.String("k")},
			Set: []ndbclient.ColumnValue{{Column: drivertest.ColValue, Value: ndbclient.String("v")}}}
		if err := c.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{op}}); err != nil {
			return err
		}
		return op.Err
	}
	require.NoError(t, write())
	dropped, err := other.DropNDBTable(want.Database, want.Name)
	require.NoError(t, err)
	require.True(t, dropped)
	droppedAt := time.Now()
	// Requests now fail, clearly: a schema error naming the table.
	var failure error
	var failedAfter time.Duration
	for time.Since(droppedAt) < 10*time.Second {
		if failure = write(); failure != nil {
			failedAfter = time.Since(droppedAt)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Error(t, failure, "writes to a dropped table kept succeeding")
	require.Contains(t, failure.Error(), "schema_change")
	_, err = other.CreateNDBTable(want)
	require.NoError(t, err)
	createdAt := time.Now()
	for {
		if err := write(); err == nil {
			break
		}
		require.Less(t, time.Since(createdAt), time.Minute, "writes did not work again after the table was created again")
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("table dropped: first failure %v after the drop: %v; served again %v after it was created again",
		failedAfter.Round(time.Millisecond), failure, time.Since(createdAt).Round(time.Millisecond))
}

// TestColumnAddedOnline adds a column to a table while it takes writes, as
// ALTER TABLE ... ADD COLUMN ... ALGORITHM=INPLACE does: the item state
// column that an existing ndbmemcache table needs for the meta protocol's
// item state. Serving goes on, nothing acknowledged is lost, and a driver
// opened afterwards (ndbgate restarted) keeps item state in the new column.
func TestColumnAddedOnline(t *testing.T) {
	cs := faultCluster(t)
	_, c, tbl := openClient(t, cs)
	other := openDriver(t, cs, 1)
	stop := make(chan struct{})
	done := make(chan *loadResult)
	go func() { done <- writeLoad(c, tbl, fmt.Sprintf("alter%d-", time.Now().UnixNano()), 4, stop) }()
	time.Sleep(time.Second)
	start := time.Now()
	require.NoError(t, other.AddNDBColumn(tbl.Database, tbl.Name, "item_state", ndbclient.TypeUint64))
	took := time.Since(start)
	time.Sleep(2 * time.Second)
	close(stop)
	res := <-done
	t.Logf("column added online in %v under 4 writers: %d writes, %d errors %v; first error %v after the start",
		took.Round(time.Millisecond), res.writes, res.errs, res.codes, errWindowStart(res, start))
	require.Empty(t, lost(t, c, tbl, res.acked))
	require.Zero(t, res.errs, "writes failed while a column was added online: %v", res.samples)
	require.Positive(t, res.writes)

	// The serving driver goes on with the shape it had; a driver opened now
	// sees the column, and keeps item state in it.
	fresh := openDriver(t, cs, 1)
	now, err := fresh.Table(tbl.Database, tbl.Name)
	require.NoError(t, err)
	require.GreaterOrEqual(t, now.ColumnIndex("item_state"), 0, "the new column is described")
	now.StateColumn = "item_state"
	var key string
	for k := range res.acked {
		key = k
		break
	}
	read := func() *ndbclient.Op {
		op := &ndbclient.Op{Kind: ndbclient.OpRead, Table: now, Key: []ndbclient.Value{ndbclient.String(key)}, Read: []int{drivertest.ColValue}}
		require.NoError(t, fresh.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{op}}))
		require.NoError(t, op.Err)
		return op
	}
	first := read()
	require.False(t, first.Meta.Fetched, "a row from before the column has no state yet")
	require.Equal(t, res.acked[key], string(first.Row[0].B))
	require.True(t, read().Meta.Fetched, "the first read recorded itself in the new column")
}

// errWindowStart is how long after start the first error came, or 0.
func errWindowStart(res *loadResult, start time.Time) time.Duration {
	if res.errs == 0 {
		return 0
	}
	return res.firstErr.Sub(start).Round(time.Millisecond)
}

// A lone flight whose answer comes late still gets it, though its
// connection's wait group was woken from outside. NDB 7.5 never clears a
// wait group's woken flag (and never initialises it, so a fresh group may
// start that way: a gateway's first seconds gave 4012 in about one start
// in thirty), after which every wait of the group returns at once; a busy
// poll that waited for a slow answer through the group spun through its
// last resort in milliseconds and failed the flight with 4012 (no answer).
// The answer is made late by stopping one data node for 300 ms: the write
// waits for its second replica. The poll's limit is the largest allowed,
// as in TestLoneFlightsShareTheExecutor: at 200 µs, round trips slowed by
// other work on the host closed the window before the late flight.
func TestLonePollOutlastsAWokenWaitGroup(t *testing.T) {
	cs := faultCluster(t)
	d := openDriverWith(t, ndbapi.Config{Connectstring: cs, PoolSize: 2, BusyPoll: time.Millisecond})
	tbl := suiteTable(t, d, "woken", true)
	c := ndbclient.NewClientWith(d, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
	write := func(k, v string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b := &ndbclient.Batch{Poll: true, Ops: []*ndbclient.Op{{Kind: ndbclient.OpWrite, Table: tbl, Key: []ndbclient.Value{ndbclient.String(k)},
			Set: []ndbclient.ColumnValue{{Column: drivertest.ColValue, Value: ndbclient.String(v)}}}}}
		if err := c.Execute(ctx, b); err != nil { // Execute's batches are lone; this one may poll
			return err
		}
		return b.Ops[0].Err
	}
	// Enough lone round trips for the poll's window to open and the wait
	// group to be made.
	for i := range 200 {
		require.NoError(t, write(fmt.Sprintf("warm-%d", i), "v"))
	}
	require.Positive(t, d.Stats().FlightsPolled, "no lone flight polled")
	require.Positive(t, d.WakePollGroups(), "no wait group to wake")
	for i := range 20 { // the polls read the wake-up, and the group stays woken
		require.NoError(t, write(fmt.Sprintf("woken-%d", i), "v"))
	}
	worker, _, err := ndbproc.DataNode(2)
	require.NoError(t, err)
	polled := d.Stats().FlightsPolled
	require.NoError(t, syscall.Kill(worker.PID, syscall.SIGSTOP))
	resumed := make(chan struct{})
	go func() {
		defer close(resumed)
		time.Sleep(300 * time.Millisecond)
		_ = syscall.Kill(worker.PID, syscall.SIGCONT)
	}()
	start := time.Now()
	err = write("late", "answered")
	took := time.Since(start)
	<-resumed
	require.NoError(t, err, "a lone flight waiting %v for its answer", took)
	require.Greater(t, d.Stats().FlightsPolled, polled, "the late flight did not poll")
	require.GreaterOrEqual(t, took, 100*time.Millisecond, "the answer was not late: the test proves nothing")
	t.Logf("the late write took %v", took)
}
