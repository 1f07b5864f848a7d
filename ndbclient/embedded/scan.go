package embedded

import (
	"context"
	"slices"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// ScanRows reads every live row of s, the columns in read, as
// ndbclient.RowScanner says. Each partition is read under its lock; the
// values are copied out, so they outlive the rows.
func (e *Engine) ScanRows(ctx context.Context, s *ndbclient.Table, read []int, limit int) ([][]ndbclient.Value, error) {
	t, err := e.tableOf(s)
	if err != nil {
		return nil, err
	}
	for _, c := range read {
		if c < 0 || c >= len(t.cols) {
			return nil, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "table %s has no column %d", s.FullName(), c)
		}
	}
	now := e.now()
	var rows [][]ndbclient.Value
	var v ndbclient.Value
	for _, p := range t.parts {
		if err := ctx.Err(); err != nil {
			return nil, ndbclient.Errorf(ndbclient.CodeTemporary, "scan of %s: %v", s.FullName(), err)
		}
		p.mu.Lock()
		for i := range p.slots {
			if p.slots[i].size == 0 {
				continue
			}
			if p.expired(int32(i), now) {
				continue
			}
			row := p.row(int32(i))
			if len(rows) == limit {
				p.mu.Unlock()
				return nil, ndbclient.Errorf(ndbclient.CodeTooLarge, "table %s has more than %d rows", s.FullName(), limit)
			}
			out := make([]ndbclient.Value, len(read))
			for j, c := range read {
				t.decode(row, c, &v)
				if v.Kind == ndbclient.KindBytes {
					v.B = slices.Clone(v.B)
				}
				out[j] = v
			}
			rows = append(rows, out)
		}
		p.mu.Unlock()
	}
	return rows, nil
}
