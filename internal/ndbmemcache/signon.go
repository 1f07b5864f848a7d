package ndbmemcache

import (
	"context"
	"fmt"
	"time"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// SignOn writes the row of last_memcached_signon that ndbmemcache writes
// when it has read its configuration: its API node id, the host's name, the
// role and the time (UTC). On the embedded engine, which has no node id,
// the row is node 0's.
func (rd Reader) SignOn(ctx context.Context, role, hostname string, now time.Time) error {
	t, err := rd.table("last_memcached_signon")
	if err != nil {
		return err
	}
	cols := columnsOf(t, "ndb_node_id", "hostname", "server_role", "signon_time")
	if err := checkColumns(t, cols); err != nil {
		return err
	}
	node := 0
	if n, ok := rd.Client.Driver().(ndbclient.NodeIdentifier); ok {
		node = n.NodeID()
	}
	op := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: t, Key: []ndbclient.Value{ndbclient.Uint(uint64(node))},
		Set: []ndbclient.ColumnValue{
			{Column: cols[1], Value: ndbclient.String(hostname)},
			{Column: cols[2], Value: ndbclient.String(role)},
			{Column: cols[3], Value: ndbclient.String(now.UTC().Format(time.DateTime))},
		}}
	err = rd.Client.Execute(ctx, &ndbclient.Batch{Ops: []*ndbclient.Op{op}})
	if err == nil {
		err = op.Err
	}
	if err != nil {
		return fmt.Errorf("signing on in %s: %w", t.FullName(), err)
	}
	return nil
}
