// Encoding text protocol replies: memcached's reply lines, values and stats,
// and the reply to a text command, including a canonical error's.

package memcache

import (
	"strconv"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// memcached's text replies, byte for byte.
var (
	replyOK             = []byte("OK\r\n")
	replyDetailUsage    = []byte("CLIENT_ERROR usage: stats detail on|off|dump\r\n")
	replyError          = []byte("ERROR\r\n")
	replyEnd            = []byte("END\r\n")
	replyStored         = []byte("STORED\r\n")
	replyNotStored      = []byte("NOT_STORED\r\n")
	replyExists         = []byte("EXISTS\r\n")
	replyNotFound       = []byte("NOT_FOUND\r\n")
	replyDeleted        = []byte("DELETED\r\n")
	replyTouched        = []byte("TOUCHED\r\n")
	replyReset          = []byte("RESET\r\n")
	replyBadFormat      = []byte("CLIENT_ERROR bad command line format\r\n")
	replyBadDataChunk   = []byte("CLIENT_ERROR bad data chunk\r\n")
	replyDeleteUsage    = []byte("CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n")
	replyInvalidDelta   = []byte("CLIENT_ERROR invalid numeric delta argument\r\n")
	replyInvalidExptime = []byte("CLIENT_ERROR invalid exptime argument\r\n")
	replyNonNumeric     = []byte("CLIENT_ERROR cannot increment or decrement non-numeric value\r\n")
	replyTooLarge       = []byte("SERVER_ERROR object too large for cache\r\n")
	replyOutOfMemory    = []byte("SERVER_ERROR out of memory storing object\r\n")
)

// AppendValue appends "VALUE <key> <flags> <bytes>\r\n<data>\r\n".
func AppendValue(dst, key []byte, flags uint32, data []byte) []byte {
	dst = appendValueHeader(dst, key, flags, len(data))
	dst = append(dst, '\r', '\n')
	dst = append(dst, data...)
	return append(dst, '\r', '\n')
}

// AppendValueCas appends "VALUE <key> <flags> <bytes> <cas>\r\n<data>\r\n".
func AppendValueCas(dst, key []byte, flags uint32, data []byte, cas uint64) []byte {
	dst = appendValueHeader(dst, key, flags, len(data))
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, cas, 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, data...)
	return append(dst, '\r', '\n')
}

func appendValueHeader(dst, key []byte, flags uint32, n int) []byte {
	dst = append(dst, "VALUE "...)
	dst = append(dst, key...)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, uint64(flags), 10)
	dst = append(dst, ' ')
	return strconv.AppendUint(dst, uint64(n), 10)
}

// AppendUint appends an incr/decr result line.
func AppendUint(dst []byte, n uint64) []byte {
	dst = strconv.AppendUint(dst, n, 10)
	return append(dst, '\r', '\n')
}

// AppendStat appends "STAT <name> <n>\r\n".
func AppendStat(dst []byte, name string, n uint64) []byte {
	dst = append(dst, "STAT "...)
	dst = append(dst, name...)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, n, 10)
	return append(dst, '\r', '\n')
}

// AppendStatString appends "STAT <name> <value>\r\n".
func AppendStatString(dst []byte, name, value string) []byte {
	dst = append(dst, "STAT "...)
	dst = append(dst, name...)
	dst = append(dst, ' ')
	dst = append(dst, value...)
	return append(dst, '\r', '\n')
}

// AppendVersion appends "VERSION <v>\r\n".
func AppendVersion(dst []byte, v string) []byte {
	dst = append(dst, "VERSION "...)
	dst = append(dst, v...)
	return append(dst, '\r', '\n')
}

// encodeText appends a text command's reply.
func (cs *connState) encodeText(dst []byte, p *pending) []byte {
	r := p.req
	if p.text.run {
		return cs.encodeTextRun(dst, p)
	}
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

// encodeTextRun answers each command of a text run (batchRun) as it would
// have been answered alone, in the order they came: a get from the run's
// get request, a set from its set request. A request that failed whole
// answers each of its commands with its error. noreply hides a set's reply,
// errors included, as memcached's does.
func (cs *connState) encodeTextRun(dst []byte, p *pending) []byte {
	gets, sets := p.req, p.sets
	g, s := 0, 0
	withCas := p.text.getKind == CmdGets
	for _, c := range p.text.cmds {
		dst = cs.spill(dst)
		r, i := gets, &g
		if c.set {
			r, i = sets, &s
		}
		if r.Outcome != gateway.OutcomeValues {
			if !c.noreply {
				dst = appendErrorReply(dst, r.Err)
			}
			continue
		}
		it := &r.Items[*i]
		*i++
		switch {
		case c.noreply:
		case it.Err != nil:
			dst = appendErrorReply(dst, it.Err)
		case c.set:
			dst = append(dst, replyStored...)
		case it.Hit && withCas:
			dst = AppendValueCas(dst, it.Key, it.Flags, it.Value, it.Cas)
			dst = append(dst, replyEnd...)
		case it.Hit:
			dst = AppendValue(dst, it.Key, it.Flags, it.Value)
			dst = append(dst, replyEnd...)
		default:
			dst = append(dst, replyEnd...)
		}
	}
	return dst
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
