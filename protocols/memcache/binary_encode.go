// Encoding binary protocol replies: the response header, values, misses,
// stats and error statuses, and the reply to a command or a run of them.

package memcache

import (
	"encoding/binary"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// binStatusText is the body memcached sends with an error status.
func binStatusText(status uint16) string {
	switch status {
	case statusKeyNotFound:
		return "Not found"
	case statusKeyExists:
		return "Data exists for key."
	case statusTooLarge:
		return "Too large."
	case statusInvalid:
		return "Invalid arguments"
	case statusNotStored:
		return "Not stored."
	case statusNonNumeric:
		return "Non-numeric server-side value for incr or decr"
	case statusUnknownCommand:
		return "Unknown command"
	case statusAuthError:
		return "Auth failure."
	case statusOutOfMemory:
		return "Out of memory"
	case statusBusy:
		return "Busy, try again"
	case statusTempFailure:
		return "Temporary failure"
	default:
		return "Internal error"
	}
}

// appendBinHeader appends a response header.
func appendBinHeader(dst []byte, op uint8, keyLen, extLen int, status uint16, bodyLen int, opaque uint32, cas uint64) []byte {
	var h [binHeaderLen]byte
	h[0], h[1] = binResMagic, op
	binary.BigEndian.PutUint16(h[2:], uint16(keyLen))
	h[4] = byte(extLen)
	binary.BigEndian.PutUint16(h[6:], status)
	binary.BigEndian.PutUint32(h[8:], uint32(bodyLen))
	binary.BigEndian.PutUint32(h[12:], opaque)
	binary.BigEndian.PutUint64(h[16:], cas)
	return append(dst, h[:]...)
}

// appendBinError appends an error response with memcached's text for status.
func appendBinError(dst []byte, op uint8, opaque uint32, status uint16) []byte {
	msg := binStatusText(status)
	dst = appendBinHeader(dst, op, 0, 0, status, len(msg), opaque, 0)
	return append(dst, msg...)
}

// appendBinValue appends a hit of a get-family command: flags, optional key,
// optional value.
func appendBinValue(dst []byte, op uint8, opaque uint32, key []byte, flags uint32, value []byte, cas uint64, withValue bool) []byte {
	keyLen := 0
	if binWithKey(op) {
		keyLen = len(key)
	}
	if !withValue {
		value = nil
	}
	dst = appendBinHeader(dst, op, keyLen, 4, statusOK, 4+keyLen+len(value), opaque, cas)
	dst = binary.BigEndian.AppendUint32(dst, flags)
	dst = append(dst, key[:keyLen]...)
	return append(dst, value...)
}

// appendBinMiss appends a get-family miss: the key for GETK-style opcodes,
// else memcached's "Not found".
func appendBinMiss(dst []byte, op uint8, opaque uint32, key []byte) []byte {
	if binWithKey(op) {
		dst = appendBinHeader(dst, op, len(key), 0, statusKeyNotFound, len(key), opaque, 0)
		return append(dst, key...)
	}
	return appendBinError(dst, op, opaque, statusKeyNotFound)
}

// appendBinStats turns memcached's text stats ("STAT name value\r\n"... "END\r\n")
// into one binary packet per stat and an empty terminator packet.
func appendBinStats(dst []byte, op uint8, opaque uint32, text []byte) []byte {
	for len(text) > 0 {
		end := 0
		for end < len(text) && text[end] != '\n' {
			end++
		}
		line := text[:end]
		if end < len(text) {
			text = text[end+1:]
		} else {
			text = nil
		}
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if len(line) < 5 || string(line[:5]) != "STAT " {
			continue
		}
		line = line[5:]
		sp := 0
		for sp < len(line) && line[sp] != ' ' {
			sp++
		}
		name, value := line[:sp], []byte(nil)
		if sp < len(line) {
			value = line[sp+1:]
		}
		dst = appendBinHeader(dst, op, len(name), 0, statusOK, len(name)+len(value), opaque, 0)
		dst = append(dst, name...)
		dst = append(dst, value...)
	}
	return appendBinHeader(dst, op, 0, 0, statusOK, 0, opaque, 0)
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

// encodeBinaryRun answers each command of a binary run (batchRun) in the
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
