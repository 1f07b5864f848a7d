package ndbclient

import "context"

// Driver is the transport under ndbclient: the embedded engine or the NDB API.
// All methods are safe for concurrent use.
type Driver interface {
	// Name identifies the driver in logs and metrics ("embedded", "ndbapi").
	Name() string
	// Table returns the schema of database.table, or SchemaError.
	Table(database, name string) (*Table, error)
	// CreateTable makes a table (embedded engine); drivers whose schema comes from
	// elsewhere check that the table exists with a compatible shape.
	CreateTable(t *Table) (*Table, error)
	// Execute runs the batch and returns when every op has its result. The
	// returned error is for the batch as a whole (e.g. Unavailable); per-op
	// errors are in each Op.Err.
	Execute(ctx context.Context, b *Batch) error
	// Submit starts the batch and calls done exactly once when every op has its
	// result, either inline on the caller's goroutine or from another goroutine.
	// done must not block.
	Submit(b *Batch, done func(*Batch, error))
	// Partition maps a key (Table.PrimaryKey order) to its partition.
	Partition(t *Table, key []Value) int
	// NodeOf maps a partition of t to the data node that holds its primary replica.
	NodeOf(t *Table, partition int) int
	// Stats reports engine-level figures for metrics and memcached's stats.
	Stats() DriverStats
	// Ready reports whether the driver can serve requests now.
	Ready() error
	Close() error
}

// InlineDriver is an optional Driver method: CompletesInline reports whether
// Submit always calls done before it returns (the embedded engine with no
// simulated round trip). Nothing can pile up in such a driver, so the
// dispatcher skips its in-flight admission: two atomic adds on a counter every
// event loop shares.
type InlineDriver interface {
	CompletesInline() bool
}

// NonBlockingDriver is an optional Driver method: SubmitNeverWaits reports
// that Submit returns without waiting for anything, even when it completes
// later (the embedded engine with fsync always, whose writes complete once
// durable). Lanes, which bound what waits in a driver, would only add
// latency to such a driver.
type NonBlockingDriver interface {
	SubmitNeverWaits() bool
}

// GroupSubmitter is an optional Driver method: SubmitGroup does what Submit
// does for each batch, done[i] completing bs[i], but sends them together, in
// one round trip when it can, and completes each as soon as its own answers
// are in: a turn's batches for different data nodes, so that a node that
// stops answering holds up only its own (the NDB driver with
// ndb.flight_wait). The slices are the caller's again once SubmitGroup
// returns.
type GroupSubmitter interface {
	SubmitGroup(bs []*Batch, done []func(*Batch, error))
}

// PartitionBatcher is an optional Driver method: Partitions does what
// Partition does for the key of each op that starts a transaction run (not
// one after a TxnWithNext), recording it with SetKeyPartition, and does it
// faster over many keys than one call a key (the NDB driver overlaps its
// partition memo's cache misses). An op it cannot place keeps no partition.
type PartitionBatcher interface {
	Partitions(ops []*Op)
}

// ColumnMaxer is an optional Driver method: MaxColumn is the largest value
// of integer column col over t's rows (0 for none, or no such table). The
// gateway starts its cas counter above it when the rows outlive the process
// (the embedded engine with a data dir), so that no cas repeats.
type ColumnMaxer interface {
	MaxColumn(t *Table, col int) uint64
}

// VolatileDriver is an optional Driver method: Volatile reports that the
// driver's rows live only as long as the process (the embedded engine), so
// nothing written by an earlier run can be read after a restart.
type VolatileDriver interface {
	Volatile() bool
}

// RowSizer is an optional Driver method: LargestRow is the most bytes a row
// of the table named like t has held (0 when none, or when the driver does
// not know the table). Front ends size the pieces of a large multi-get by it
// rather than by the widest row the table's columns allow.
type RowSizer interface {
	LargestRow(t *Table) int
}

// RowScanner is an optional Driver method: ScanRows reads every row of t,
// the columns in read in that order, as committed reads. More than limit
// rows is an error (TooLarge), so memory stays bounded. It is for
// small tables read rarely, such as ndbmemcache's configuration: a scan is
// no part of a batch, and takes no lane.
type RowScanner interface {
	ScanRows(ctx context.Context, t *Table, read []int, limit int) ([][]Value, error)
}

// Sequencer is an optional Driver method: NextAutoIncrement takes the next
// value of t's auto-increment sequence. On NDB that is the sequence mysqld's
// AUTO_INCREMENT column and ndbmemcache draw from (Ndb::getAutoIncrementValue);
// on the embedded engine it counts up from the largest value of t's first
// key column. It may wait for the cluster: call it off the event loops.
type Sequencer interface {
	NextAutoIncrement(ctx context.Context, t *Table) (uint64, error)
}

// ExpiryBinder is an optional Driver method, for a driver that keeps each
// table's expire column itself (the embedded engine, whose reaper frees
// expired rows): BindExpireColumn makes column col of t, a table it
// described, the expire column of a table made without one (its expiry
// kept by the caller if byCaller: Table.ExpiryByCaller), and returns the
// schema ops must carry from then on. Client.BindExpireColumn calls it;
// other drivers read the column from each op's Table.
type ExpiryBinder interface {
	BindExpireColumn(t *Table, col int, byCaller bool) (*Table, error)
}

// NodeIdentifier is an optional Driver method: NodeID is the cluster's node
// id of the driver's first connection (an API node), as ndbmemcache signs on
// under its own. The embedded engine has none.
type NodeIdentifier interface {
	NodeID() int
}

// HealthReporter is a driver that can tell it is stuck in a state it cannot
// leave by itself, so that a liveness probe restarts the process.
type HealthReporter interface {
	Health() error
}

// DriverStats is a snapshot of engine figures.
type DriverStats struct {
	Items      uint64 // live rows
	Bytes      uint64 // bytes accounted against the limit
	LimitBytes uint64 // 0 = no limit
	Evictions  uint64 // rows evicted by LRU
	Expired    uint64 // expired rows found by a command, reaped, or evicted
	// ExpiredOnAccess counts the commands that found their row there but
	// expired, a miss (memcached's get_expired). The embedded engine frees
	// the row then; NDB leaves it for a write or delete.
	ExpiredOnAccess uint64
	Tables          int
	Partitions      int
	Nodes           int
	OutOfMemory     uint64 // writes refused for memory
	// LiveNodes is how many data nodes the driver can reach now (the
	// embedded engine: all of them).
	LiveNodes int
	// Connects counts attachments to the cluster: the first one and each
	// recovery after every data node was lost (the embedded engine: 1).
	Connects uint64
	// HintedTransactions counts transactions started with their key as the
	// TC hint; TransactionsOnPrimary those whose TC ran on the data node
	// holding the key's primary replica (NDB; 0 on the embedded engine).
	HintedTransactions    uint64
	TransactionsOnPrimary uint64
	// ConnectionsRemade counts pooled connections made again to learn data
	// nodes added to the cluster; TablesRedescribed counts tables described
	// again after NDB reported them altered or reorganised (NDB).
	ConnectionsRemade uint64
	TablesRedescribed uint64
	// FlightsOnCaller counts flights run on a lone caller's goroutine
	// (Batch.Lone) instead of being handed to another thread (NDB).
	FlightsOnCaller uint64
	// FlightsPolled counts the round trips of lone flights that polled the
	// cluster's sockets for their answer before sleeping (ndb.busy_poll;
	// NDB).
	FlightsPolled uint64
	// BatchesOwed counts batches a round trip returned without, their data
	// node not having answered within ndb.flight_wait; each completed when
	// it answered (NDB).
	BatchesOwed uint64
	// The embedded engine's data dir (0 without one): bytes of log since the
	// last snapshot, snapshots taken, and failed log writes or fsyncs.
	LogBytes       uint64
	Snapshots      uint64
	LogWriteErrors uint64
	// RowsLost counts rows a rollback could not put back (the embedded
	// engine, when the OS refuses memory for them).
	RowsLost uint64
}
