// A table's schema as the data dir keeps it (JSON in a create entry), and how
// a configured table is compared with the stored one.

package embedded

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// schemaRec is a table's schema as the data dir keeps it: what shapes its
// rows (ndbclient.Table's StateColumn is for NDB and is not kept).
type schemaRec struct {
	Database          string             `json:"database"`
	Name              string             `json:"name"`
	Columns           []ndbclient.Column `json:"columns"`
	PrimaryKey        []int              `json:"primary_key"`
	DistributionKey   []int              `json:"distribution_key,omitempty"`
	Partitions        int                `json:"partitions"`
	OrderedPrimaryKey bool               `json:"ordered_primary_key,omitempty"`
	Eviction          bool               `json:"eviction,omitempty"`
	ExpireColumn      int                `json:"expire_column"`
}

func encodeSchema(s *ndbclient.Table) []byte {
	b, err := json.Marshal(schemaRec{
		Database: s.Database, Name: s.Name, Columns: s.Columns, PrimaryKey: s.PrimaryKey,
		DistributionKey: s.DistributionKey, Partitions: s.Partitions, OrderedPrimaryKey: s.OrderedPrimaryKey,
		Eviction: s.Eviction, ExpireColumn: s.ExpireColumn,
	})
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	return b
}

// maxRestoredPartitions bounds a stored table's partitions (the config allows
// at most 4096).
const maxRestoredPartitions = 4096

func decodeSchema(b []byte) (*ndbclient.Table, error) {
	var r schemaRec
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("table schema: %w", err)
	}
	if r.Partitions < 1 || r.Partitions > maxRestoredPartitions {
		return nil, fmt.Errorf("table %s.%s: %d partitions", r.Database, r.Name, r.Partitions)
	}
	s := &ndbclient.Table{Database: r.Database, Name: r.Name, Columns: r.Columns, PrimaryKey: r.PrimaryKey,
		DistributionKey: r.DistributionKey, Partitions: r.Partitions, OrderedPrimaryKey: r.OrderedPrimaryKey,
		Eviction: r.Eviction, ExpireColumn: r.ExpireColumn}
	if _, err := newTable(s, 1); err != nil {
		return nil, fmt.Errorf("table schema: %w", err)
	}
	return s, nil
}

// shapeDiff says how s differs from the stored table, for the error that a
// configuration no longer matches its data dir.
func (t *table) shapeDiff(s *ndbclient.Table) string {
	st := t.schema
	if len(s.Columns) != len(st.Columns) {
		return fmt.Sprintf("%d columns stored, %d asked for", len(st.Columns), len(s.Columns))
	}
	for i := range s.Columns {
		if a, b := st.Columns[i], s.Columns[i]; !a.Equal(&b) {
			return fmt.Sprintf("column %d stored as %s %s(%d), asked for as %s %s(%d)", i, a.Name, a.Type, a.Length, b.Name, b.Type, b.Length)
		}
	}
	switch {
	case !slices.Equal(s.PrimaryKey, st.PrimaryKey):
		return "another primary key"
	case s.Eviction != st.Eviction:
		return fmt.Sprintf("eviction %v stored, %v asked for", st.Eviction, s.Eviction)
	case s.ExpireColumn >= 0 && s.ExpireColumn != t.expireColumn():
		return "another expire column"
	case s.Partitions != 0 && s.Partitions != st.Partitions:
		return fmt.Sprintf("%d partitions stored, %d asked for", st.Partitions, s.Partitions)
	}
	return "another distribution key"
}

// Restored reports whether the table named like s was loaded from the data
// dir (its shape then comes from there, and CreateTable checks a
// configuration's against it).
func (e *Engine) Restored(s *ndbclient.Table) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.byName[s.FullName()]
	return t != nil && t.restored
}

// logCreate logs the creation of t, which will be table number
// len(tables). e.mu is held.
func (e *Engine) logCreate(t *table) error {
	if err := e.wal.refusing(); err != nil {
		return err
	}
	frame := beginFrame(nil)
	frame = appendCreate(frame, len(*e.tables.Load()), encodeSchema(t.schema))
	endFrame(frame, 0)
	return e.wal.appendWait(frame)
}
