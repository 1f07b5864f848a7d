//go:build ndbapi

package ndbapi

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"log/slog"
	"time"
	"unsafe"
)

// Following a cluster that changes while it serves (shim_follow.cpp).
//
//   - A table reorganised (ALTER TABLE ... REORGANIZE PARTITION after a node
//     group was added) or altered online: NDB marks the API's cached table
//     object Altered. Requests keep working on the old object, since NDB
//     routes every operation by its own hash, but its partitions and
//     primaries are the old ones: the TC hint and the dispatcher's lanes
//     would miss. The table is described again, which brings the new
//     partitions, primaries and lane map, and forgets the partition memo.
//   - Data nodes added to the configuration: an NDB API connection learns
//     the cluster's nodes when it connects, and never talks to a data node
//     it did not know then. The NDB manual asks for a rolling restart of
//     every API node after data nodes are added; the driver makes its pooled
//     connections again one at a time instead, each swapped in between two
//     flights, so no request fails and the process keeps running.

// alteredCheckInterval is how often the described tables are checked for a
// change NDB reported: a local read per table and connection.
const alteredCheckInterval = time.Second

// configCheckInterval is how often the management server is asked how many
// data nodes the configuration has: one short connection to it.
const configCheckInterval = 5 * time.Second

// configCheckTimeout bounds that question; a management server that does not
// answer is asked again next time (the data nodes serve without it).
const configCheckTimeout = 2 * time.Second

// follow runs until Close: it checks for altered tables every
// alteredCheckInterval and for added data nodes every configCheckInterval.
func (d *Driver) follow() {
	defer d.watching.Done()
	t := time.NewTicker(alteredCheckInterval)
	defer t.Stop()
	var lastConfig time.Time
	for {
		select {
		case <-d.stopWatch:
			return
		case <-t.C:
		}
		if d.detached.Load() {
			continue // the reattach describes every table again
		}
		d.checkAltered()
		if time.Since(lastConfig) >= configCheckInterval {
			lastConfig = time.Now()
			d.checkDataNodes()
		}
	}
}

// checkAltered describes again each table NDB reported altered.
func (d *Driver) checkAltered() {
	d.mu.RLock()
	var altered []*tableInfo
	for _, ti := range d.tables() {
		if !d.refreshing[ti] && C.ndbgate_table_altered(d.pool, C.int(ti.id)) == 1 {
			altered = append(altered, ti)
		}
	}
	d.mu.RUnlock()
	for _, ti := range altered {
		d.refreshLater(ti.schema)
	}
}

// checkDataNodes remakes, one at a time, the pooled connections that know
// fewer data nodes than the management server's configuration has.
func (d *Driver) checkDataNodes() {
	cs := C.CString(d.connectstring)
	defer C.free(unsafe.Pointer(cs))
	var errBuf [512]C.char
	want := int(C.ndbgate_config_data_nodes(cs, C.int(configCheckTimeout.Milliseconds()), &errBuf[0], C.int(len(errBuf))))
	if want <= 0 {
		d.log.LogAttrs(context.Background(), slog.LevelDebug, "NDB: could not ask the management server for its data nodes",
			slog.String("error", C.GoString(&errBuf[0])))
		return
	}
	rolled := 0
	for i := range d.execs {
		known := int(C.ndbgate_conn_data_nodes(d.pool, C.int(i)))
		if known >= want {
			continue
		}
		start := time.Now()
		if C.ndbgate_roll_connection(d.pool, C.int(i), cs, C.int(d.timeoutSec), &errBuf[0], C.int(len(errBuf))) != 0 {
			d.log.LogAttrs(context.Background(), slog.LevelWarn, "NDB: could not make a connection again to learn the new data nodes; will retry",
				slog.Int("connection", i), slog.Int("data_nodes", want), slog.String("error", C.GoString(&errBuf[0])))
			return
		}
		rolled++
		d.connectionsRemade.Add(1)
		d.log.LogAttrs(context.Background(), slog.LevelInfo, "NDB: made a connection again to learn the cluster's new data nodes",
			slog.Int("connection", i), slog.Int("known_data_nodes", known), slog.Int("data_nodes", want),
			slog.Duration("took", time.Since(start)))
	}
	if rolled == 0 {
		return
	}
	d.nodes.Store(int32(C.ndbgate_data_nodes(d.pool)))
	// Primaries may now be on the new nodes (a table made after the node
	// group was added, or reorganised before every connection knew them).
	// d.tables() is a copy-on-write snapshot: no lock to range over it.
	for _, ti := range d.tables() {
		d.storeLanes(ti, int(ti.partitionCount.Load()))
	}
}
