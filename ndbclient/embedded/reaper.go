package embedded

import "time"

// reapStep bounds the slots examined per lock hold, so the reaper never keeps
// a partition from its clients for long.
const reapStep = 1024

func (e *Engine) reaper(every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C:
			e.reap()
		}
	}
}

// reap makes one pass over every table with an expire column and returns the
// number of expired rows it freed.
func (e *Engine) reap() int {
	now := e.now()
	n := 0
	for _, t := range *e.tables.Load() {
		if t.expireColumn() < 0 || t.byCaller.Load() {
			continue
		}
		for _, p := range t.parts {
			n += p.reap(now)
			select {
			case <-e.stop:
				return n
			default:
			}
		}
	}
	return n
}

// reap sweeps the partition's slots in steps of reapStep, unlocking between
// steps. Rows added behind the cursor meanwhile wait for the next pass.
func (p *partition) reap(now uint32) int {
	n := 0
	for start := 0; ; start += reapStep {
		p.mu.Lock()
		end := min(start+reapStep, len(p.slots))
		for s := start; s < end; s++ {
			if p.slots[s].size != 0 && p.expired(int32(s), now) {
				p.del(int32(s))
				n++
			}
		}
		done := end >= len(p.slots)
		if done {
			p.settle() // not before: it renumbers the slots the cursor walks
		}
		p.mu.Unlock()
		if done {
			break
		}
	}
	p.e.expired.Add(uint64(n))
	return n
}
