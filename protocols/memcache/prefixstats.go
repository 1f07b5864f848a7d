package memcache

import (
	"bytes"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/ndbgate/ndbgate/gateway"
)

// prefixStats is memcached's "stats detail": once turned on, gets (and
// their hits), sets and deletes are counted per key prefix, the key up to
// its first ':'. Keys without one are not counted. As in memcached, meta
// commands are not counted, and at most maxPrefixes prefixes are kept.
type prefixStats struct {
	on atomic.Bool
	mu sync.Mutex // guards byPrefix and order
	// byPrefix holds one counter set per prefix; order keeps the first-seen
	// order for the dump.
	byPrefix map[string]*prefixCounts
	order    []string
}

type prefixCounts struct{ gets, hits, sets, deletes uint64 }

// maxPrefixes is memcached's MAX_PREFIX_COUNT: the memory of the table is
// bounded whatever keys clients send.
const maxPrefixes = 1 << 16

const prefixDelimiter = ':'

// counts returns key's prefix counters, or nil when key has no prefix or
// the table is full. The caller holds mu.
func (ps *prefixStats) counts(key []byte) *prefixCounts {
	i := bytes.IndexByte(key, prefixDelimiter)
	if i < 0 {
		return nil
	}
	if c := ps.byPrefix[string(key[:i])]; c != nil { // no allocation: the compiler's map lookup by []byte
		return c
	}
	if len(ps.order) >= maxPrefixes {
		return nil
	}
	if ps.byPrefix == nil {
		ps.byPrefix = map[string]*prefixCounts{}
	}
	prefix := string(key[:i])
	c := &prefixCounts{}
	ps.byPrefix[prefix] = c
	ps.order = append(ps.order, prefix)
	return c
}

// record counts a finished command, where memcached counts it: text and
// binary gets (each key, with its hit), storage commands and deletes.
func (ps *prefixStats) record(p *pending) {
	if p.kind.IsMeta() {
		return
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p.hasSets { // a binary run's sets
		for i := 0; i < p.sets.NumKeys(); i++ {
			if c := ps.counts(p.sets.Key(i)); c != nil {
				c.sets++
			}
		}
	}
	r := p.req
	if r.Outcome == gateway.OutcomeNone {
		return // a reply made without the gateway (an error, stats), or a run of sets only
	}
	kind := p.kind
	if len(p.bin.keys) > 0 || p.text.run {
		kind = CmdGet // a run's req holds its gets
	}
	switch kind {
	case CmdGet, CmdGets, CmdGat, CmdGats:
		for i := range r.Items {
			if c := ps.counts(r.Items[i].Key); c != nil {
				c.gets++
				if r.Items[i].Hit {
					c.hits++
				}
			}
		}
	case CmdSet, CmdAdd, CmdReplace, CmdAppend, CmdPrepend, CmdCas:
		if c := ps.counts(r.Key(0)); c != nil {
			c.sets++
		}
	case CmdDelete:
		if c := ps.counts(r.Key(0)); c != nil {
			c.deletes++
		}
	}
}

// appendDump renders memcached's "stats detail dump": a PREFIX line per
// prefix, then END.
func (ps *prefixStats) appendDump(dst []byte) []byte {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, prefix := range ps.order {
		c := ps.byPrefix[prefix]
		dst = append(dst, "PREFIX "...)
		dst = append(dst, prefix...)
		dst = append(dst, " get "...)
		dst = strconv.AppendUint(dst, c.gets, 10)
		dst = append(dst, " hit "...)
		dst = strconv.AppendUint(dst, c.hits, 10)
		dst = append(dst, " set "...)
		dst = strconv.AppendUint(dst, c.sets, 10)
		dst = append(dst, " del "...)
		dst = strconv.AppendUint(dst, c.deletes, 10)
		dst = append(dst, "\r\n"...)
	}
	return append(dst, replyEnd...)
}

// reset forgets every prefix ("stats reset", as memcached's stats_prefix_clear).
func (ps *prefixStats) reset() {
	ps.mu.Lock()
	ps.byPrefix, ps.order = nil, nil
	ps.mu.Unlock()
}

// detailText answers text "stats detail <word>".
func (ps *prefixStats) detailText(dst, word []byte) []byte {
	switch string(word) {
	case "on":
		ps.on.Store(true)
		return append(dst, replyOK...)
	case "off":
		ps.on.Store(false)
		return append(dst, replyOK...)
	case "dump":
		return ps.appendDump(dst)
	}
	return append(dst, replyDetailUsage...)
}

// detailBinary answers a binary stat request whose key is "detail <word>":
// "on" and "off" with the bare end of stats, "dump" with one stat named
// "detailed" holding the text dump, anything else with key-not-found.
func (ps *prefixStats) detailBinary(dst []byte, op uint8, opaque uint32, word []byte) []byte {
	switch string(word) {
	case "on", "off":
		ps.on.Store(string(word) == "on")
	case "dump":
		dump := ps.appendDump(nil)
		const name = "detailed"
		dst = appendBinHeader(dst, op, len(name), 0, statusOK, len(name)+len(dump), opaque, 0)
		dst = append(dst, name...)
		dst = append(dst, dump...)
	default:
		return appendBinError(dst, op, opaque, statusKeyNotFound)
	}
	return appendBinHeader(dst, op, 0, 0, statusOK, 0, opaque, 0)
}
