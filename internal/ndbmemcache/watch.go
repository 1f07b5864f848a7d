package ndbmemcache

import (
	"context"
	"log/slog"
	"time"
)

// Watch follows cur's role until ctx ends: every interval it reads the
// role's update_timestamp, and when that changed it reads the configuration
// again and hands it to apply, as ndbmemcache reloads on an update of its
// role's row. (ndbmemcache waits on an NDB event for that update; a
// primary-key read a second costs the cluster as little and needs no event
// to be created.) A read or an apply that fails is logged, and the
// configuration served stays as it was until the next change.
func (rd Reader) Watch(ctx context.Context, cur *Config, every time.Duration, apply func(*Config) error, log *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	seen, lastErr := cur.Updated, ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		updated, err := rd.RoleUpdated(ctx, cur.Role)
		if err != nil {
			if err.Error() != lastErr && ctx.Err() == nil {
				log.Warn("ndbmemcache: cannot read the server role's update_timestamp", "role", cur.Role, "error", err)
			}
			lastErr = err.Error()
			continue
		}
		lastErr = ""
		if updated == seen {
			continue
		}
		seen = updated
		next, err := rd.Read(ctx, cur.Role)
		if err == nil {
			err = apply(next)
		}
		rd.Metrics.reloaded(err == nil)
		if err != nil {
			log.Error("ndbmemcache: reconfiguration failed; still serving the previous configuration", "role", cur.Role, "update_timestamp", updated, "error", err)
			continue
		}
		changes := next.Changes(cur)
		log.Info("ndbmemcache: reconfigured", "role", cur.Role, "update_timestamp", updated, "changes", len(changes))
		for _, c := range changes {
			log.Info("ndbmemcache: " + c)
		}
		cur = next
	}
}
