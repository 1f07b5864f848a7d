// Parsing the meta protocol: a meta command's line, flags and data block.

package memcache

import (
	"encoding/base64"
)

// Meta protocol (mg, ms, md, ma, mn, me) parsing, following memcached's
// proto_text.c / proto_parser.c: flags are single letters, some followed by a
// token ("T30", "Oabc"); replies echo some of them in request order.

// MetaFlags is a parsed meta command's flags. Slices alias the input buffer.
type MetaFlags struct {
	Has    uint64 // one bit per flag letter: Has&metaBit('v') != 0
	Tokens []byte // the flags part of the line, walked again to build the reply
	KeyB64 bool   // b: the key arrived base64-encoded (and goes back so)
	RawKey []byte // the key as sent
	// Tokens of T, N, R (memcached exptime form), F, C, E, M, J, D.
	TTL, Vivify, Recache int64
	ClientFlags          uint32
	CompareCas, NewCas   uint64
	Mode                 byte
	Initial, Delta       uint64
}

// metaBit is the Has bit of flag letter c ('A'..'z').
func metaBit(c byte) uint64 { return 1 << (c - 'A') }

// On reports whether flag c was given.
func (m *MetaFlags) On(c byte) bool { return m.Has&metaBit(c) != 0 }

const (
	metaMaxTokens    = 20 // memcached's MFLAG_MAX_OPT_LENGTH, counting command, key and terminator
	metaMaxOpaqueLen = 32 // MFLAG_MAX_OPAQUE_LENGTH, counting the 'O'
)

var (
	replyMetaNoop          = []byte("MN\r\n")
	replyMetaMiss          = []byte("EN\r\n")
	replyFlagsTooLongMg    = []byte("CLIENT_ERROR options flags are too long\r\n")
	replyFlagsTooLong      = []byte("CLIENT_ERROR options flags too long\r\n")
	replyDuplicateFlag     = []byte("CLIENT_ERROR duplicate flag\r\n")
	replyInvalidOrDupFlag  = []byte("CLIENT_ERROR invalid or duplicate flag\r\n")
	replyInvalidFlag       = []byte("CLIENT_ERROR invalid flag\r\n")
	replyBadToken          = []byte("CLIENT_ERROR bad token in command line format\r\n")
	replyKeyDecode         = []byte("CLIENT_ERROR error decoding key\r\n")
	replyMTokenLength      = []byte("CLIENT_ERROR incorrect length for M token\r\n")
	replyBadInitial        = []byte("CLIENT_ERROR invalid numeric initial value\r\n")
	replyBadDelta          = []byte("CLIENT_ERROR invalid numeric delta value\r\n")
	replyOpaqueTooLong     = []byte("CLIENT_ERROR opaque token too long\r\n")
	replyBadMsMode         = []byte("CLIENT_ERROR invalid mode for ms M token\r\n")
	replyBadMaMode         = []byte("CLIENT_ERROR invalid mode for ma M token\r\n")
	replyMetaUnknownResult = []byte("SERVER_ERROR Unhandled storage type.\r\n")
)

// meta parses one meta command; w[0] is its two-letter name.
func (p *Parser) meta(kind CommandKind, buf []byte, lineLen int, line []byte, w [][]byte, cmd *Command) Result {
	cmd.Kind = kind
	switch kind {
	case CmdMetaNoop:
		return Result{Status: StatusOK, N: lineLen}
	case CmdMetaDebug:
		return p.metaDebug(lineLen, w, cmd)
	}
	if len(w) < 2 {
		return errorAt(lineLen, replyError)
	}
	if len(w[1]) > KeyMaxLength {
		return errorAt(lineLen, replyBadFormat)
	}
	m := &cmd.Meta
	m.RawKey = w[1]
	first := 2
	vlen := int64(0)
	if kind == CmdMetaSet {
		if len(w) == 2 {
			return errorAt(lineLen, replyBadFormat)
		}
		first = 3
	}
	if len(w)+1 > metaMaxTokens {
		if kind == CmdMetaGet {
			return errorAt(lineLen, replyFlagsTooLongMg)
		}
		return errorAt(lineLen, replyFlagsTooLong)
	}
	swallow := 0
	if kind == CmdMetaSet {
		n, ok := parseInt32(w[2])
		if !ok || n < 0 || n > maxDataLen {
			return errorAt(lineLen, replyBadFormat)
		}
		vlen = n
		swallow = int(n) + 2
	}
	refuse := func(reply []byte) Result {
		return Result{Status: StatusError, N: lineLen, Reply: reply, Swallow: swallow}
	}
	if len(w) > first {
		start := len(line) - len(bytesAfter(line, w[first]))
		m.Tokens = line[start:]
	}
	if reply := p.metaFlags(w[first:], cmd); reply != nil {
		// md and ma answer every flag error alike (the opaque length is
		// checked later in memcached, so it keeps its own message).
		if (kind == CmdMetaDelete || kind == CmdMetaArithmetic) && string(reply) != string(replyOpaqueTooLong) {
			reply = replyInvalidOrDupFlag
		}
		return refuse(reply)
	}
	if !m.KeyB64 && !validKey(cmd.Keys[0]) {
		return refuse(replyBadFormat)
	}
	cmd.Quiet = m.On('q')
	switch kind {
	case CmdMetaSet:
		switch m.Mode {
		case 0, 'S', 's', 'E', 'e', 'A', 'a', 'P', 'p', 'R', 'r':
		default:
			return refuse(replyBadMsMode)
		}
		cmd.Flags, cmd.Exptime = m.ClientFlags, m.TTL
		maxItem := p.MaxItemSize
		if maxItem <= 0 {
			maxItem = 1 << 20
		}
		if int(vlen) > maxItem {
			r := refuse(replyTooLarge)
			r.TooLarge = true // memcached drops the old item whatever the mode
			return r
		}
		total := lineLen + swallow
		if len(buf) < total {
			if p.MaxBuffered > 0 && total > p.MaxBuffered {
				r := refuse(replyOutOfMemory)
				r.TooLarge, r.NoMemory = true, true
				return r
			}
			return Result{Status: StatusNeedMore, Need: total}
		}
		if buf[total-2] != '\r' || buf[total-1] != '\n' {
			return errorAt(total, replyBadDataChunk)
		}
		cmd.Data = buf[lineLen : total-2]
		return Result{Status: StatusOK, N: total}
	case CmdMetaArithmetic:
		switch m.Mode {
		case 0, 'I', 'i', '+', 'D', 'd', '-':
		default:
			return refuse(replyBadMaMode)
		}
	}
	return Result{Status: StatusOK, N: lineLen}
}

// bytesAfter returns line from the start of word w (a subslice of line).
func bytesAfter(line, w []byte) []byte {
	off := cap(line) - cap(w)
	return line[off:]
}

// metaFlags checks and decodes the flag tokens and sets cmd.Keys. It returns
// memcached's error reply, or nil. Like memcached, it stops at the first
// duplicate or unknown flag and otherwise reports the last bad token.
func (p *Parser) metaFlags(tokens [][]byte, cmd *Command) []byte {
	m := &cmd.Meta
	m.Delta = 1
	key := m.RawKey
	var bad []byte
	for _, t := range tokens {
		c := t[0]
		if c < 'A' || c > 'z' {
			if c >= 127 {
				return replyDuplicateFlag
			}
			return replyInvalidFlag
		}
		if m.Has&metaBit(c) != 0 {
			return replyDuplicateFlag
		}
		m.Has |= metaBit(c)
		arg := t[1:]
		var ok bool
		switch c {
		case 'b':
			n, err := base64.StdEncoding.Decode(p.b64[:], m.RawKey)
			if err != nil || n == 0 {
				bad = replyKeyDecode
				continue
			}
			key, m.KeyB64 = p.b64[:n], true
		case 'N':
			if m.Vivify, ok = parseInt32(arg); !ok {
				bad = replyBadToken
			}
		case 'T':
			if m.TTL, ok = parseInt32(arg); !ok {
				bad = replyBadToken
			}
		case 'R':
			if m.Recache, ok = parseInt32(arg); !ok {
				bad = replyBadToken
			}
		case 'O':
			if len(t) > metaMaxOpaqueLen {
				bad = replyOpaqueTooLong
			}
		case 'F':
			if m.ClientFlags, ok = parseUint32(arg); !ok {
				bad = replyBadFormat
			}
		case 'C':
			if m.CompareCas, ok = parseUint64(arg); !ok {
				bad = replyBadToken
			}
		case 'E':
			if m.NewCas, ok = parseUint64(arg); !ok {
				bad = replyBadToken
			}
		case 'M':
			if len(t) != 2 {
				bad = replyMTokenLength
			} else {
				m.Mode = t[1]
			}
		case 'J':
			if m.Initial, ok = parseUint64(arg); !ok {
				bad = replyBadInitial
			}
		case 'D':
			if m.Delta, ok = parseUint64(arg); !ok {
				bad = replyBadDelta
			}
		case 'P', 'L', 'k', 's', 't', 'c', 'f', 'v', 'h', 'l', 'u', 'q', 'x', 'I':
		default:
			return replyInvalidFlag
		}
	}
	cmd.Keys = append(cmd.Keys[:0], key)
	p.keys = cmd.Keys[:0]
	return bad
}

// metaDebug parses "me <key> [b]".
func (p *Parser) metaDebug(lineLen int, w [][]byte, cmd *Command) Result {
	if len(w) < 2 || len(w[1]) > KeyMaxLength {
		return errorAt(lineLen, replyBadFormat)
	}
	cmd.Meta.RawKey = w[1]
	key := w[1]
	if len(w) >= 3 && string(w[2]) == "b" {
		n, err := base64.StdEncoding.Decode(p.b64[:], w[1])
		if err != nil || n == 0 {
			return errorAt(lineLen, replyBadFormat)
		}
		key, cmd.Meta.KeyB64 = p.b64[:n], true
		cmd.Meta.Has |= metaBit('b')
	} else if !validKey(key) {
		return errorAt(lineLen, replyBadFormat)
	}
	cmd.Keys = append(cmd.Keys[:0], key)
	p.keys = cmd.Keys[:0]
	return Result{Status: StatusOK, N: lineLen}
}
