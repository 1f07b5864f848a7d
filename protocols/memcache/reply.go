package memcache

import (
	"encoding/binary"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// encode appends p's reply: a reply made before (fixed, or render's), or
// its dialect's encoder's. This file's encoders and meta_conn.go's are the
// one place canonical errors become memcached replies.
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

// encodeText appends a text command's reply.
func (cs *connState) encodeText(dst []byte, p *pending) []byte {
	r := p.req
	if p.text.piece {
		// A get in pieces answers as one: after a piece fails, its error
		// line ends the reply and the later pieces say nothing.
		failed := cs.pieceFailed
		cs.pieceFailed = p.text.more && (failed || r.Outcome != gateway.OutcomeValues || itemFailed(r))
		if failed {
			return dst
		}
	}
	switch r.Outcome {
	case gateway.OutcomeValues:
		for i := range r.Items {
			if r.Items[i].Err != nil {
				return appendErrorReply(dst, r.Items[i].Err)
			}
		}
		withCas := p.kind == CmdGets || p.kind == CmdGats
		for i := range r.Items {
			dst = cs.spill(dst)
			it := &r.Items[i]
			if !it.Hit {
				continue
			}
			if withCas {
				dst = AppendValueCas(dst, it.Key, it.Flags, it.Value, it.Cas)
			} else {
				dst = AppendValue(dst, it.Key, it.Flags, it.Value)
			}
		}
		if p.text.more {
			return dst // a later piece ends the reply
		}
		return append(dst, replyEnd...)
	case gateway.OutcomeStored:
		return append(dst, replyStored...)
	case gateway.OutcomeNotStored:
		return append(dst, replyNotStored...)
	case gateway.OutcomeExists:
		return append(dst, replyExists...)
	case gateway.OutcomeNotFound:
		return append(dst, replyNotFound...)
	case gateway.OutcomeDeleted:
		return append(dst, replyDeleted...)
	case gateway.OutcomeTouched:
		return append(dst, replyTouched...)
	case gateway.OutcomeNumber:
		return AppendUint(dst, r.Number)
	default:
		return appendErrorReply(dst, r.Err)
	}
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

// itemFailed reports whether a key of r's get failed (not a miss).
func itemFailed(r *gateway.Request) bool {
	for i := range r.Items {
		if r.Items[i].Err != nil {
			return true
		}
	}
	return false
}

// encodeBinary appends p's binary reply: quiet commands say nothing on success
// (quiet gets nothing on a miss), errors are always sent.
func (cs *connState) encodeBinary(dst []byte, p *pending) []byte {
	if len(p.bin.keys) > 0 {
		return cs.encodeBinaryRun(dst, p)
	}
	r := p.req
	status := uint16(statusOK)
	switch r.Outcome {
	case gateway.OutcomeStored, gateway.OutcomeDeleted, gateway.OutcomeTouched:
		if binQuiet(p.bin.opcode) {
			return dst
		}
		return appendBinHeader(dst, p.bin.opcode, 0, 0, statusOK, 0, p.bin.opaque, r.NewCas)
	case gateway.OutcomeNumber:
		if binQuiet(p.bin.opcode) {
			return dst
		}
		dst = appendBinHeader(dst, p.bin.opcode, 0, 0, statusOK, 8, p.bin.opaque, r.NewCas)
		return binary.BigEndian.AppendUint64(dst, r.Number)
	case gateway.OutcomeNotStored:
		switch p.kind {
		case CmdAdd:
			status = statusKeyExists
		case CmdReplace:
			status = statusKeyNotFound
		default:
			status = statusNotStored
		}
	case gateway.OutcomeExists:
		status = statusKeyExists
	case gateway.OutcomeNotFound:
		status = statusKeyNotFound
	default:
		status = binStatusOf(r.Err)
	}
	return appendBinError(dst, p.bin.opcode, p.bin.opaque, status)
}

// encodeBinaryRun answers each command of a binary run (getRun) in the
// order they came: a get from the run's get request, a set from its set
// request. A request that failed whole answers each of its commands with
// its error.
func (cs *connState) encodeBinaryRun(dst []byte, p *pending) []byte {
	gets, sets := p.req, p.sets
	g, s := 0, 0
	for _, bk := range p.bin.keys {
		dst = cs.spill(dst)
		r, i := gets, &g
		if bk.set {
			r, i = sets, &s
		}
		if r.Outcome != gateway.OutcomeValues {
			dst = appendBinError(dst, bk.opcode, bk.opaque, binStatusOf(r.Err))
			continue
		}
		it := &r.Items[*i]
		*i++
		switch {
		case it.Err != nil:
			dst = appendBinError(dst, bk.opcode, bk.opaque, binStatusOf(it.Err))
		case bk.set:
			if !binQuiet(bk.opcode) {
				dst = appendBinHeader(dst, bk.opcode, 0, 0, statusOK, 0, bk.opaque, it.Cas)
			}
		case it.Hit:
			dst = appendBinValue(dst, bk.opcode, bk.opaque, it.Key, it.Flags, it.Value, it.Cas, bk.opcode != opTouch)
		case !binQuiet(bk.opcode):
			dst = appendBinMiss(dst, bk.opcode, bk.opaque, it.Key)
		}
	}
	return dst
}

// binStatusOf maps a canonical error onto a binary status.
func binStatusOf(err error) uint16 {
	switch ndbclient.CodeOf(err) {
	case ndbclient.CodeNotFound:
		return statusKeyNotFound
	case ndbclient.CodeOutOfMemory:
		return statusOutOfMemory
	case ndbclient.CodeTooLarge:
		return statusTooLarge
	case ndbclient.CodeNotNumeric:
		return statusNonNumeric
	case ndbclient.CodeInvalidArgument:
		return statusInvalid
	case ndbclient.CodeOverloaded:
		return statusBusy
	case ndbclient.CodeTemporary, ndbclient.CodeUnavailable, ndbclient.CodeUnknownResult:
		return statusTempFailure
	default:
		return statusInternal
	}
}

// appendErrorReply maps a canonical error onto memcached's reply for it.
func appendErrorReply(dst []byte, err error) []byte {
	switch ndbclient.CodeOf(err) {
	case ndbclient.CodeOutOfMemory:
		return append(dst, replyOutOfMemory...)
	case ndbclient.CodeTooLarge:
		return append(dst, replyTooLarge...)
	case ndbclient.CodeNotNumeric:
		return append(dst, replyNonNumeric...)
	case ndbclient.CodeInvalidArgument:
		return append(dst, replyBadFormat...)
	case ndbclient.CodeOverloaded:
		return append(dst, replyBusy...)
	case ndbclient.CodeTemporary:
		return append(dst, replyTemporary...)
	case ndbclient.CodeUnavailable:
		return append(dst, replyUnavailable...)
	case ndbclient.CodeUnknownResult:
		return append(dst, replyUnknownResult...)
	case ndbclient.CodeSchemaError:
		return append(dst, replySchema...)
	case ndbclient.CodeStorage:
		return append(dst, replyStorage...)
	default:
		return append(dst, replyInternal...)
	}
}

// ndbgate's own SERVER_ERROR lines for backend conditions memcached lacks.
var (
	replyBusy          = []byte("SERVER_ERROR busy, try again\r\n")
	replyTemporary     = []byte("SERVER_ERROR temporary failure, try again\r\n")
	replyUnavailable   = []byte("SERVER_ERROR backend unavailable\r\n")
	replyUnknownResult = []byte("SERVER_ERROR result unknown, the write may have been applied\r\n")
	replySchema        = []byte("SERVER_ERROR schema error\r\n")
	replyStorage       = []byte("SERVER_ERROR cannot write to the data dir (disk full or failing), not stored\r\n")
	replyInternal      = []byte("SERVER_ERROR internal error\r\n")
	replyTooManyConns  = []byte("ERROR Too many open connections\r\n")
)
