// memcached's binary protocol: its opcodes, statuses and header, and parsing
// a request (ParseBinary).

package memcache

import "encoding/binary"

// memcached's binary protocol: request opcodes.
const (
	opGet        = 0x00
	opSet        = 0x01
	opAdd        = 0x02
	opReplace    = 0x03
	opDelete     = 0x04
	opIncrement  = 0x05
	opDecrement  = 0x06
	opQuit       = 0x07
	opFlush      = 0x08
	opGetQ       = 0x09
	opNoop       = 0x0a
	opVersion    = 0x0b
	opGetK       = 0x0c
	opGetKQ      = 0x0d
	opAppend     = 0x0e
	opPrepend    = 0x0f
	opStat       = 0x10
	opSetQ       = 0x11
	opAddQ       = 0x12
	opReplaceQ   = 0x13
	opDeleteQ    = 0x14
	opIncrementQ = 0x15
	opDecrementQ = 0x16
	opQuitQ      = 0x17
	opFlushQ     = 0x18
	opAppendQ    = 0x19
	opPrependQ   = 0x1a
	opVerbosity  = 0x1b
	opTouch      = 0x1c
	opGAT        = 0x1d
	opGATQ       = 0x1e
	opSaslList   = 0x20
	opSaslAuth   = 0x21
	opSaslStep   = 0x22
	opGATK       = 0x23
	opGATKQ      = 0x24
)

// Response status codes.
const (
	statusOK             = 0x00
	statusKeyNotFound    = 0x01
	statusKeyExists      = 0x02
	statusTooLarge       = 0x03
	statusInvalid        = 0x04
	statusNotStored      = 0x05
	statusNonNumeric     = 0x06
	statusAuthError      = 0x20
	statusAuthContinue   = 0x21
	statusUnknownCommand = 0x81
	statusOutOfMemory    = 0x82
	statusInternal       = 0x84
	statusBusy           = 0x85
	statusTempFailure    = 0x86
)

const (
	binReqMagic  = 0x80
	binResMagic  = 0x81
	binHeaderLen = 24
	// binBodyLimit is memcached's ITEM_SIZE_MAX_UPPER_LIMIT: a larger body is a
	// protocol error that closes the connection.
	binBodyLimit = 1 << 30
	// noCreate in an incr/decr's expiration means "do not create".
	noCreate = 0xffffffff
	// saslMechMax is memcached's MAX_SASL_MECH_LEN; saslDataMax bounds a
	// SASL response (PLAIN: authzid, user and password).
	saslMechMax = 32
	saslDataMax = 1024
)

// binQuiet reports whether an opcode is a quiet variant.
func binQuiet(op uint8) bool {
	switch op {
	case opGetQ, opGetKQ, opSetQ, opAddQ, opReplaceQ, opDeleteQ, opIncrementQ, opDecrementQ,
		opQuitQ, opFlushQ, opAppendQ, opPrependQ, opGATQ, opGATKQ:
		return true
	}
	return false
}

// binWithKey reports whether replies to an opcode carry the key.
func binWithKey(op uint8) bool {
	return op == opGetK || op == opGetKQ || op == opGATK || op == opGATKQ
}

// ParseBinary parses one binary-protocol request from buf. Like Parse it is
// pure; error replies are built in the parser's scratch buffer, valid until the
// next call.
func (p *Parser) ParseBinary(buf []byte, cmd *Command) Result {
	*cmd = Command{Keys: p.keys[:0], Binary: true}
	if len(buf) < binHeaderLen {
		return Result{Status: StatusNeedMore}
	}
	if buf[0] != binReqMagic {
		return Result{Status: StatusError, N: len(buf), Close: true} // memcached hangs up
	}
	op := buf[1]
	keyLen := int(binary.BigEndian.Uint16(buf[2:]))
	extLen := int(buf[4])
	bodyLen := int(binary.BigEndian.Uint32(buf[8:]))
	cmd.Opcode, cmd.Opaque = op, binary.BigEndian.Uint32(buf[12:])
	cmd.Cas = binary.BigEndian.Uint64(buf[16:])
	cmd.Quiet, cmd.WithKey = binQuiet(op), binWithKey(op)
	fail := func(status uint16, n, swallow int, close bool) Result {
		p.reply = appendBinError(p.reply[:0], op, cmd.Opaque, status)
		return Result{Status: StatusError, N: n, Reply: p.reply, Swallow: swallow, Close: close}
	}
	if keyLen+extLen > bodyLen {
		return fail(statusUnknownCommand, binHeaderLen, 0, true)
	}
	if bodyLen > binBodyLimit {
		return fail(statusInvalid, binHeaderLen, 0, true)
	}
	if keyLen > KeyMaxLength {
		return fail(statusInvalid, binHeaderLen, 0, true)
	}
	head := binHeaderLen + extLen + keyLen
	valueLen := bodyLen - extLen - keyLen
	ext := func() []byte { return buf[binHeaderLen : binHeaderLen+extLen] }
	key := func() []byte { return buf[binHeaderLen+extLen : head] }

	// Which shape the opcode requires, as memcached checks it.
	var valid bool
	switch op {
	case opVersion, opNoop, opQuit, opQuitQ:
		valid = extLen == 0 && keyLen == 0 && bodyLen == 0
	case opFlush, opFlushQ:
		valid = keyLen == 0 && bodyLen == extLen && (extLen == 0 || extLen == 4)
	case opSet, opSetQ, opAdd, opAddQ, opReplace, opReplaceQ:
		valid = extLen == 8 && keyLen != 0
	case opAppend, opAppendQ, opPrepend, opPrependQ:
		valid = extLen == 0 && keyLen != 0
	case opGet, opGetQ, opGetK, opGetKQ, opDelete, opDeleteQ:
		valid = extLen == 0 && keyLen > 0 && bodyLen == keyLen
	case opIncrement, opIncrementQ, opDecrement, opDecrementQ:
		valid = extLen == 20 && keyLen > 0 && bodyLen == keyLen+extLen
	case opStat:
		valid = extLen == 0 && bodyLen == keyLen
	case opVerbosity:
		valid = extLen == 4 && keyLen == 0 && bodyLen == 4
	case opTouch, opGAT, opGATQ, opGATK, opGATKQ:
		valid = extLen == 4 && keyLen != 0 && bodyLen == keyLen+extLen
	case opSaslList:
		valid = extLen == 0
	case opSaslAuth, opSaslStep:
		valid = extLen == 0 && keyLen > 0 && keyLen <= saslMechMax && bodyLen-keyLen <= saslDataMax
	default:
		// Unknown opcode: answered, and its body skipped.
		return fail(statusUnknownCommand, binHeaderLen, bodyLen, false)
	}
	if !valid {
		return fail(statusInvalid, binHeaderLen, 0, true)
	}

	// A value too large is refused as soon as its header is here, and swallowed.
	isStore := op == opSet || op == opSetQ || op == opAdd || op == opAddQ || op == opReplace ||
		op == opReplaceQ || op == opAppend || op == opAppendQ || op == opPrepend || op == opPrependQ
	maxItem := p.MaxItemSize
	if maxItem <= 0 {
		maxItem = 1 << 20
	}
	total := binHeaderLen + bodyLen
	// Refused for its size, or for the memory to receive it.
	tooLarge := valueLen > maxItem
	noRoom := !tooLarge && len(buf) < total && p.MaxBuffered > 0 && total > p.MaxBuffered
	if isStore && (tooLarge || noRoom) {
		if len(buf) < head {
			return Result{Status: StatusNeedMore, Need: total}
		}
		cmd.Kind = CmdSet
		if op != opSet && op != opSetQ {
			cmd.Kind = CmdAppend // not a set: nothing to unlink
		}
		cmd.Keys = append(cmd.Keys[:0], key())
		p.keys = cmd.Keys[:0]
		status := uint16(statusTooLarge)
		if noRoom {
			status = statusOutOfMemory
		}
		r := fail(status, head, valueLen, false)
		r.TooLarge, r.NoMemory = true, noRoom
		return r
	}
	if len(buf) < total {
		return Result{Status: StatusNeedMore, Need: total}
	}
	if keyLen > 0 {
		cmd.Keys = append(cmd.Keys[:0], key())
		p.keys = cmd.Keys[:0]
	}
	e := ext()
	switch op {
	case opGet, opGetQ, opGetK, opGetKQ:
		cmd.Kind = CmdGet
	case opTouch:
		cmd.Kind, cmd.Exptime = CmdTouch, int64(binary.BigEndian.Uint32(e))
	case opGAT, opGATQ, opGATK, opGATKQ:
		cmd.Kind, cmd.Exptime = CmdGat, int64(binary.BigEndian.Uint32(e))
	case opSet, opSetQ, opAdd, opAddQ, opReplace, opReplaceQ:
		cmd.Kind = map3(op, CmdSet, CmdAdd, CmdReplace)
		if cmd.Cas != 0 { // any store with a cas compares it, as in memcached
			cmd.Kind = CmdCas
		}
		cmd.Flags = binary.BigEndian.Uint32(e)
		cmd.Exptime = int64(binary.BigEndian.Uint32(e[4:]))
		cmd.Data = buf[head:total]
	case opAppend, opAppendQ:
		cmd.Kind, cmd.Data = CmdAppend, buf[head:total]
	case opPrepend, opPrependQ:
		cmd.Kind, cmd.Data = CmdPrepend, buf[head:total]
	case opDelete, opDeleteQ:
		cmd.Kind = CmdDelete
	case opIncrement, opIncrementQ, opDecrement, opDecrementQ:
		cmd.Kind = CmdIncr
		if op == opDecrement || op == opDecrementQ {
			cmd.Kind = CmdDecr
		}
		cmd.Delta = binary.BigEndian.Uint64(e)
		cmd.Initial = binary.BigEndian.Uint64(e[8:])
		exp := binary.BigEndian.Uint32(e[16:])
		cmd.Create = exp != noCreate
		if cmd.Create {
			cmd.Exptime = int64(exp)
		}
	case opQuit, opQuitQ:
		cmd.Kind = CmdQuit
	case opFlush, opFlushQ:
		cmd.Kind = CmdFlushAll
		if extLen == 4 {
			cmd.Delay = int64(binary.BigEndian.Uint32(e))
		}
	case opNoop:
		cmd.Kind = CmdNoop
	case opVersion:
		cmd.Kind = CmdVersion
	case opStat:
		cmd.Kind, cmd.Arg = CmdStats, key()
		cmd.Keys = cmd.Keys[:0]
	case opVerbosity:
		cmd.Kind, cmd.Level = CmdVerbosity, int64(binary.BigEndian.Uint32(e))
	case opSaslList:
		cmd.Kind = CmdSaslList
		cmd.Keys = cmd.Keys[:0]
	case opSaslAuth, opSaslStep:
		cmd.Kind, cmd.Data = CmdSaslAuth, buf[head:total]
		if op == opSaslStep {
			cmd.Kind = CmdSaslStep
		}
		cmd.Keys = cmd.Keys[:0]
		cmd.Arg = key() // the mechanism
	}
	cmd.NoReply = cmd.Quiet
	return Result{Status: StatusOK, N: total}
}

func map3(op uint8, set, add, replace CommandKind) CommandKind {
	switch op {
	case opAdd, opAddQ:
		return add
	case opReplace, opReplaceQ:
		return replace
	}
	return set
}
