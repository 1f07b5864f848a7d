// Encoding meta protocol replies: an item's flags and value, the debug
// reply, and the flag tokens they echo.

package memcache

import (
	"strconv"
	"time"

	"github.com/ndbgate/ndbgate/gateway"
)

// encodeMeta appends the reply of a finished meta command (or mg run).
func (cs *connState) encodeMeta(dst []byte, p *pending) []byte {
	r := p.req
	switch p.kind {
	case CmdMetaGet:
		if r.Outcome != gateway.OutcomeValues {
			// Each mg of a run answers for itself: q hides a miss, not an
			// error, as in memcached.
			for range max(1, len(p.meta.keys)) {
				dst = appendErrorReply(cs.spill(dst), r.Err)
			}
			return dst
		}
		now := uint32(time.Now().Unix())
		for i := range r.Items {
			dst = appendMetaItem(cs.spill(dst), p, i, &r.Items[i], now)
		}
		return dst
	case CmdMetaDebug:
		return appendMetaDebug(dst, p)
	}
	tokens, key := p.metaTokens(0)
	mk := &p.meta.keys[0]
	var code string
	switch r.Outcome {
	case gateway.OutcomeStored, gateway.OutcomeDeleted, gateway.OutcomeTouched, gateway.OutcomeNumber:
		if mk.quiet && !r.Created { // memcached answers an ma q that created its item
			return dst
		}
		code = "HD"
	case gateway.OutcomeNotStored:
		code = "NS"
	case gateway.OutcomeExists:
		code = "EX"
	case gateway.OutcomeNotFound:
		code = "NF"
	default:
		return appendErrorReply(dst, r.Err)
	}
	var number []byte
	if r.Outcome == gateway.OutcomeNumber && hasFlag(tokens, 'v') {
		number = strconv.AppendUint(make([]byte, 0, 20), r.Number, 10)
		dst = append(dst, "VA "...)
		dst = strconv.AppendInt(dst, int64(len(number)), 10)
	} else {
		dst = append(dst, code...)
	}
	ok := r.Outcome == gateway.OutcomeStored || r.Outcome == gateway.OutcomeNumber
	forEachToken(tokens, func(t []byte) {
		switch t[0] {
		case 'O':
			dst = append(append(dst, ' '), t...)
		case 'k':
			dst = appendMetaKey(dst, key, mk.b64)
		case 'c':
			if ok {
				dst = strconv.AppendUint(append(dst, " c"...), r.NewCas, 10)
			} else if p.kind == CmdMetaSet {
				dst = append(dst, " c0"...) // memcached: a set that stored nothing has cas 0
			}
		case 's':
			if ok && p.kind == CmdMetaSet {
				dst = strconv.AppendInt(append(dst, " s"...), int64(r.Size), 10)
			}
		case 't':
			if ok && p.kind == CmdMetaArithmetic {
				dst = appendTTL(append(dst, " t"...), r.Expire, uint32(time.Now().Unix()))
			}
		}
	})
	dst = append(dst, "\r\n"...)
	if number != nil {
		dst = append(append(dst, number...), "\r\n"...)
	}
	return dst
}

// appendMetaItem appends one mg reply: VA/HD with the flags asked for, or EN.
func appendMetaItem(dst []byte, p *pending, i int, it *gateway.Item, now uint32) []byte {
	tokens, key := p.metaTokens(i)
	mk := &p.meta.keys[i]
	if it.Err != nil {
		return appendErrorReply(dst, it.Err)
	}
	if !it.Hit {
		if mk.quiet {
			return dst
		}
		dst = append(dst, "EN"...)
		forEachToken(tokens, func(t []byte) {
			switch t[0] {
			case 'O':
				dst = append(append(dst, ' '), t...)
			case 'k':
				dst = appendMetaKey(dst, key, mk.b64)
			}
		})
		return append(dst, "\r\n"...)
	}
	value := hasFlag(tokens, 'v')
	if c, ok := flagArg(tokens, 'C'); ok { // mg C: skip the value if unchanged
		if cas, ok := parseUint64(c); ok && cas == it.Cas {
			value = false
		}
	}
	if value {
		dst = strconv.AppendInt(append(dst, "VA "...), int64(len(it.Value)), 10)
	} else {
		dst = append(dst, "HD"...)
	}
	forEachToken(tokens, func(t []byte) {
		switch t[0] {
		case 's':
			dst = strconv.AppendInt(append(dst, " s"...), int64(len(it.Value)), 10)
		case 't':
			dst = appendTTL(append(dst, " t"...), it.Expire, now)
		case 'c':
			dst = strconv.AppendUint(append(dst, " c"...), it.Cas, 10)
		case 'f':
			dst = strconv.AppendUint(append(dst, " f"...), uint64(it.Flags), 10)
		case 'l':
			la := uint32(0)
			if it.Meta.LastAccess != 0 && now > it.Meta.LastAccess {
				la = now - it.Meta.LastAccess
			}
			dst = strconv.AppendUint(append(dst, " l"...), uint64(la), 10)
		case 'h':
			if it.Meta.Fetched {
				dst = append(dst, " h1"...)
			} else {
				dst = append(dst, " h0"...)
			}
		case 'O':
			dst = append(append(dst, ' '), t...)
		case 'k':
			dst = appendMetaKey(dst, key, mk.b64)
		}
	})
	// memcached's order: Z (someone holds the token), X (stale), W (you won).
	if it.Meta.TokenSent {
		dst = append(dst, " Z"...)
	}
	if it.Meta.Stale {
		dst = append(dst, " X"...)
	}
	if it.Won {
		dst = append(dst, " W"...)
	}
	dst = append(dst, "\r\n"...)
	if value {
		dst = append(append(dst, it.Value...), "\r\n"...)
	}
	return dst
}

// appendMetaDebug appends me's "ME <key> exp= la= cas= fetch= cls= size=" line.
func appendMetaDebug(dst []byte, p *pending) []byte {
	r := p.req
	if r.Outcome != gateway.OutcomeValues {
		return appendErrorReply(dst, r.Err)
	}
	it := &r.Items[0]
	if it.Err != nil {
		return appendErrorReply(dst, it.Err)
	}
	if !it.Hit {
		return append(dst, replyMetaMiss...)
	}
	_, key := p.metaTokens(0)
	now := uint32(time.Now().Unix())
	dst = append(append(dst, "ME "...), key...)
	dst = append(dst, " exp="...)
	if it.Expire == 0 {
		dst = append(dst, "-1"...)
	} else {
		dst = strconv.AppendInt(dst, int64(it.Expire)-int64(now), 10)
	}
	la := int64(0)
	if it.Meta.LastAccess != 0 {
		la = max(int64(now)-int64(it.Meta.LastAccess), 0)
	}
	dst = strconv.AppendInt(append(dst, " la="...), la, 10)
	dst = strconv.AppendUint(append(dst, " cas="...), it.Cas, 10)
	if it.Meta.Fetched {
		dst = append(dst, " fetch=yes"...)
	} else {
		dst = append(dst, " fetch=no"...)
	}
	dst = append(dst, " cls=1 size="...)
	dst = strconv.AppendInt(dst, int64(len(r.Key(0))+len(it.Value)), 10)
	return append(dst, "\r\n"...)
}

func appendMetaKey(dst, key []byte, b64 bool) []byte {
	dst = append(dst, " k"...)
	dst = append(dst, key...) // as sent: base64 text when b64
	if b64 {
		dst = append(dst, " b"...)
	}
	return dst
}

func appendTTL(dst []byte, expire, now uint32) []byte {
	if expire == 0 {
		return append(dst, "-1"...)
	}
	if expire <= now {
		return append(dst, '0')
	}
	return strconv.AppendUint(dst, uint64(expire-now), 10)
}

// forEachToken calls f with each space-separated flag token.
func forEachToken(tokens []byte, f func(t []byte)) {
	for i := 0; i < len(tokens); {
		for i < len(tokens) && tokens[i] == ' ' {
			i++
		}
		j := i
		for j < len(tokens) && tokens[j] != ' ' {
			j++
		}
		if j > i {
			f(tokens[i:j])
		}
		i = j
	}
}

func hasFlag(tokens []byte, c byte) bool {
	_, ok := flagArg(tokens, c)
	return ok
}

// flagArg returns the token argument of flag c.
func flagArg(tokens []byte, c byte) (arg []byte, ok bool) {
	forEachToken(tokens, func(t []byte) {
		if !ok && t[0] == c {
			arg, ok = t[1:], true
		}
	})
	return arg, ok
}
