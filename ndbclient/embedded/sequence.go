package embedded

import (
	"context"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// NextAutoIncrement takes the next value of the sequence of the table named
// like s (ndbclient.Sequencer): one above the largest value its first key
// column holds when first asked, so that rows kept in a data dir are never
// numbered again after a restart, then one more each time. A value handed
// out is never handed out again while the process lives, even when its row
// was never written or is deleted.
func (e *Engine) NextAutoIncrement(_ context.Context, s *ndbclient.Table) (uint64, error) {
	e.mu.Lock()
	t := e.byName[s.FullName()]
	e.mu.Unlock()
	if t == nil {
		return 0, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s does not exist", s.FullName())
	}
	if len(t.pk) == 0 || !t.schema.Columns[t.pk[0]].Type.IsInteger() {
		return 0, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s has no integer first key column to number", s.FullName())
	}
	t.seq.mu.Lock()
	defer t.seq.mu.Unlock()
	if t.seq.last == 0 {
		t.seq.last = e.MaxColumn(t.schema, t.pk[0])
	}
	t.seq.last++
	return t.seq.last, nil
}

var _ ndbclient.Sequencer = (*Engine)(nil)
