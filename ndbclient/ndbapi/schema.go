package ndbapi

import (
	"fmt"
	"slices"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// NDB errors that say a flight used a table object the dictionary has moved on
// from (ndberror.cc, classification SchemaError).
const (
	errSchemaVersion   = 241 // Invalid schema object version: an online ALTER happened
	errTableDropping   = 283 // Table is being dropped
	errTableNotDefined = 284 // Table not defined in transaction coordinator
	errNoSuchTable     = 709 // No such table existed
	errNoSuchTable2    = 723 // No such table existed
)

// staleSchema looks at a flight's results. An op refused for an outdated table
// version was not executed, so it becomes Temporary and the dispatcher's
// retry runs it again once the table is looked up anew. The tables to look up
// again (also those reported missing: a copying ALTER recreates them under a
// new id) are returned, each once.
func staleSchema(ops []*ndbclient.Op) []*ndbclient.Table {
	var stale []*ndbclient.Table
	for _, op := range ops {
		again, err := staleError(op.Table, op.Err)
		op.Err = err
		if !again {
			continue
		}
		seen := false
		for _, t := range stale {
			seen = seen || t == op.Table
		}
		if !seen {
			stale = append(stale, op.Table)
		}
	}
	return stale
}

// staleError is staleSchema for one error of an op or a scan on t: whether
// t is to be looked up again, and the error to report (Temporary for an
// outdated table version).
func staleError(t *ndbclient.Table, err error) (again bool, _ error) {
	e, ok := err.(*ndbclient.Error)
	if !ok || e.Code != ndbclient.CodeSchemaError || t == nil {
		return false, err
	}
	switch e.NativeCode {
	case errSchemaVersion, errTableNotDefined:
		return true, &ndbclient.Error{Code: ndbclient.CodeTemporary, NativeCode: e.NativeCode,
			Message: fmt.Sprintf("%s.%s changed in the NDB dictionary; looking it up again (%s)", t.Database, t.Name, e.Message)}
	case errTableDropping, errNoSuchTable, errNoSuchTable2:
		return true, err
	}
	return false, err
}

// compatible checks a table's new description against the one the gateway's
// containers were built on: every column they may use must still be there,
// at the same position and of the same shape. Columns added at the end (an
// online ADD COLUMN) are fine.
func compatible(old, cur *tableInfo) error {
	o, c := old.schema, cur.schema
	name := o.Database + "." + o.Name
	if len(c.Columns) < len(o.Columns) {
		return fmt.Errorf("%s lost columns (%d, was %d)", name, len(c.Columns), len(o.Columns))
	}
	for i := range o.Columns {
		oc, cc := o.Columns[i], c.Columns[i]
		if oc.Name != cc.Name {
			return fmt.Errorf("%s column %d is now %s, was %s", name, i, cc.Name, oc.Name)
		}
		// The character set and ENUM/SET names count: they say what the
		// bytes mean.
		if oc.Type != cc.Type || oc.Length != cc.Length || oc.Nullable != cc.Nullable ||
			oc.Precision != cc.Precision || oc.Scale != cc.Scale || old.cols[i] != cur.cols[i] ||
			oc.Charset != cc.Charset || !slices.Equal(oc.Enum, cc.Enum) || !slices.Equal(oc.Set, cc.Set) {
			return fmt.Errorf("%s column %s changed type", name, oc.Name)
		}
	}
	if !sameInts(o.PrimaryKey, c.PrimaryKey) || !sameInts(o.DistributionKey, c.DistributionKey) {
		return fmt.Errorf("%s changed its primary or distribution key", name)
	}
	return nil
}
