// Replying, for every dialect: a queued command's reply goes out through its
// dialect's encoder (text_encode.go, meta_encode.go, binary_encode.go).

package memcache

import (
	"github.com/ndbgate/ndbgate/gateway"
)

// encode appends p's reply: a reply made before (fixed, or render's), or
// its dialect's encoder's. appendErrorReply (text_encode.go, for text and
// meta) and binStatusOf (binary_encode.go) are the one place canonical
// errors become memcached replies.
func (cs *connState) encode(dst []byte, p *pending) []byte {
	if p.result().Outcome == gateway.OutcomeNone || len(p.fixed) > 0 {
		return append(dst, p.fixed...)
	}
	switch p.dialect {
	case dialectBinary:
		return cs.encodeBinary(dst, p)
	case dialectMeta:
		return cs.encodeMeta(dst, p)
	}
	return cs.encodeText(dst, p)
}

// spill writes dst out once it holds flushEarly bytes and returns it empty,
// so that encoding a get of large values does not build its reply whole.
func (cs *connState) spill(dst []byte) []byte {
	if len(dst) < flushEarly {
		return dst
	}
	cs.send(dst)
	return cs.t.Output()
}
