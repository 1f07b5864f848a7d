// Parsing the text protocol: a command line (Parse, which hands the meta
// commands to meta_parse.go) and a storage command's data block.

package memcache

import (
	"bytes"
	"math"
)

// Resume is where a retrieval served in slices stopped: the length of its
// command line (Result.N of its first parse), and its first key not yet
// started, as bytes past the start of the line's first key (KeySkip).
type Resume struct {
	Line, Skip int
}

// KeySkip is how many bytes past keys[0]'s start keys[i] starts, where keys
// are keys of one parsed line (Command.Keys).
func KeySkip(keys [][]byte, i int) int { return cap(keys[0]) - cap(keys[i]) }

// ParseFrom parses the next slice of a retrieval served in slices: its kind
// and arguments, and at most limit of its keys from at.Skip on. It reads no
// further into the line than those keys (the first parse found the line's
// end and checked every key), so a get of any size costs each slice only
// its own keys. cmd.Next is where the key after them starts (0: they were
// the last); Result.N is at.Line. A Resume that does not fit buf (no
// retrieval line of that length, or a skip that lands on no key) is
// refused with ERROR.
func (p *Parser) ParseFrom(buf []byte, at Resume, limit int, cmd *Command) Result {
	*cmd = Command{Keys: p.keys[:0]}
	if at.Line < 1 || at.Line > len(buf) || buf[at.Line-1] != '\n' || at.Skip <= 0 || limit < 1 {
		n := bytes.IndexByte(buf, '\n') + 1
		if n == 0 {
			n = len(buf)
		}
		return errorAt(n, replyError)
	}
	line := commandLine(buf[:at.Line])
	w := p.words[:p.split(line)]
	res := refuse(replyError)
	if len(w) > 0 {
		if kind := retrievalKind(w[0]); kind != CmdNone {
			res = p.retrieval(kind, line, w, at.Skip, limit, cmd)
		}
	}
	if res.Status == StatusError {
		cmd.Keys = cmd.Keys[:0]
	}
	res.N = at.Line
	return res
}

// Parse parses the first command in buf into cmd. Slices in cmd alias buf.
func (p *Parser) Parse(buf []byte, cmd *Command) Result {
	*cmd = Command{Keys: p.keys[:0]}
	nl := bytes.IndexByte(buf, '\n')
	if nl < 0 {
		return p.incomplete(buf)
	}
	lineLen := nl + 1
	line := commandLine(buf[:lineLen])
	n := p.split(line)
	if n == 0 {
		return errorAt(lineLen, replyError)
	}
	w := p.words[:n]
	var res Result
	switch string(w[0]) {
	case "get", "gets", "gat", "gats":
		res = p.retrieval(retrievalKind(w[0]), line, w, 0, 0, cmd)
	case "set":
		return p.storage(CmdSet, buf, lineLen, w, cmd)
	case "add":
		return p.storage(CmdAdd, buf, lineLen, w, cmd)
	case "replace":
		return p.storage(CmdReplace, buf, lineLen, w, cmd)
	case "append":
		return p.storage(CmdAppend, buf, lineLen, w, cmd)
	case "prepend":
		return p.storage(CmdPrepend, buf, lineLen, w, cmd)
	case "cas":
		return p.storage(CmdCas, buf, lineLen, w, cmd)
	case "incr":
		res = p.arithmetic(CmdIncr, w, cmd)
	case "decr":
		res = p.arithmetic(CmdDecr, w, cmd)
	case "delete":
		res = p.delete(w, cmd)
	case "touch":
		res = p.touch(w, cmd)
	case "stats":
		cmd.Kind = CmdStats
		if n > 1 {
			cmd.Arg = w[1]
		}
		if n > 2 {
			cmd.Arg2 = w[2]
		}
	case "flush_all":
		res = p.flushAll(w, cmd)
	case "version":
		cmd.Kind = CmdVersion
	case "quit":
		cmd.Kind = CmdQuit
	case "verbosity":
		res = p.verbosity(w, cmd)
	case "mg":
		return p.meta(CmdMetaGet, buf, lineLen, line, w, cmd)
	case "ms":
		return p.meta(CmdMetaSet, buf, lineLen, line, w, cmd)
	case "md":
		return p.meta(CmdMetaDelete, buf, lineLen, line, w, cmd)
	case "ma":
		return p.meta(CmdMetaArithmetic, buf, lineLen, line, w, cmd)
	case "mn":
		return p.meta(CmdMetaNoop, buf, lineLen, line, w, cmd)
	case "me":
		return p.meta(CmdMetaDebug, buf, lineLen, line, w, cmd)
	default:
		// memcached hangs up on what looks like an HTTP request line.
		if n > 1 && bytes.HasPrefix(w[n-1], []byte("HTTP/")) {
			return Result{Status: StatusError, N: lineLen, Close: true}
		}
		res = Result{Status: StatusError, Reply: replyError}
	}
	if res.Status == StatusError && cmd.NoReply {
		res.Reply = nil
	}
	if res.Status == StatusError {
		cmd.Keys = cmd.Keys[:0]
	}
	res.N = lineLen
	return res
}

// commandLine is a command's line without its "\n" or "\r\n".
func commandLine(withNewline []byte) []byte {
	line := withNewline[:len(withNewline)-1]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line
}

// retrievalKind is the command a retrieval verb names; CmdNone for any
// other word.
func retrievalKind(verb []byte) CommandKind {
	switch string(verb) {
	case "get":
		return CmdGet
	case "gets":
		return CmdGets
	case "gat":
		return CmdGat
	case "gats":
		return CmdGats
	}
	return CmdNone
}

// incomplete decides whether a line without a newline may still grow.
func (p *Parser) incomplete(buf []byte) Result {
	if len(buf) <= maxLine {
		return Result{Status: StatusNeedMore}
	}
	// Past 2 KiB only a multi-key get may continue, as in memcached.
	lead := 0
	for lead < len(buf) && lead <= 100 && buf[lead] == ' ' {
		lead++
	}
	rest := buf[lead:]
	if lead <= 100 && len(buf) <= maxGetLine &&
		(bytes.HasPrefix(rest, []byte("get ")) || bytes.HasPrefix(rest, []byte("gets ")) ||
			bytes.HasPrefix(rest, []byte("gat ")) || bytes.HasPrefix(rest, []byte("gats "))) {
		return Result{Status: StatusNeedMore}
	}
	return Result{Status: StatusError, N: len(buf), Close: true}
}

// split tokenizes line on spaces into p.words. Runs of spaces count as one, as in
// memcached; beyond maxWords the count is maxWords+1 so callers see "too many".
func (p *Parser) split(line []byte) int {
	n := 0
	i := 0
	for i < len(line) {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		if i == len(line) {
			break
		}
		j := i
		for j < len(line) && line[j] != ' ' {
			j++
		}
		if n == maxWords {
			p.words[n] = line[i:]
			return n + 1
		}
		p.words[n] = line[i:j]
		n++
		i = j
	}
	return n
}

// retrieval parses get/gets <key>* and gat/gats <exptime> <key>*. Keys are read
// from the line itself, not the word array, so a get may carry any number.
// With skip > 0 they start skip bytes past the first key's start, and with
// limit > 0 at most limit are taken, cmd.Next marking the next (ParseFrom).
func (p *Parser) retrieval(kind CommandKind, line []byte, w [][]byte, skip, limit int, cmd *Command) Result {
	cmd.Kind = kind
	first := 1
	if kind == CmdGat || kind == CmdGats {
		if len(w) < 2 {
			return refuse(replyError)
		}
		exp, ok := parseInt32(w[1])
		if !ok {
			return refuse(replyInvalidExptime)
		}
		cmd.Exptime = exp
		first = 2
	} else if len(w) < 2 {
		return refuse(replyError)
	}
	// Skip the words already consumed, then take every remaining word as a key.
	rest := line
	for i := 0; i < first; i++ {
		rest = skipWord(rest)
	}
	for len(rest) > 0 && rest[0] == ' ' {
		rest = rest[1:]
	}
	firstKey := rest
	if skip > 0 {
		if skip >= len(rest) || rest[skip-1] != ' ' || rest[skip] == ' ' {
			return refuse(replyError)
		}
		rest = rest[skip:]
	}
	keys := cmd.Keys[:0]
	for {
		for len(rest) > 0 && rest[0] == ' ' {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			break
		}
		if limit > 0 && len(keys) == limit {
			cmd.Next = cap(firstKey) - cap(rest)
			break
		}
		end := bytes.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		key := rest[:end]
		if !validKey(key) {
			cmd.Keys = keys[:0]
			p.keys = keys[:0]
			return refuse(replyBadFormat)
		}
		keys = append(keys, key)
		rest = rest[end:]
	}
	cmd.Keys = keys
	p.keys = keys[:0]
	return Result{Status: StatusOK}
}

// skipWord drops leading spaces and one word.
func skipWord(b []byte) []byte {
	for len(b) > 0 && b[0] == ' ' {
		b = b[1:]
	}
	for len(b) > 0 && b[0] != ' ' {
		b = b[1:]
	}
	return b
}

// maxDataLen is memcached's bound on a data block's declared length
// (INT_MAX - 2, so that length plus CRLF fits an int). A longer one is a
// malformed command line: refused with nothing swallowed, as memcached does.
const maxDataLen = math.MaxInt32 - 2

// storage parses <cmd> <key> <flags> <exptime> <bytes> [<cas>] [noreply] and its
// data block. Once the length is known, a refused command's block is swallowed
// (as current memcached does) so its bytes are never run as commands.
func (p *Parser) storage(kind CommandKind, buf []byte, lineLen int, w [][]byte, cmd *Command) Result {
	cmd.Kind = kind
	minWords := 5
	if kind == CmdCas {
		minWords = 6
	}
	if len(w) != minWords && len(w) != minWords+1 {
		return errorAt(lineLen, replyError)
	}
	cmd.NoReply = string(w[len(w)-1]) == "noreply"
	quiet := func(r Result) Result {
		if cmd.NoReply {
			r.Reply = nil
		}
		return r
	}
	vlen, ok := parseInt32(w[4])
	if !ok || vlen < 0 || vlen > maxDataLen {
		return quiet(errorAt(lineLen, replyBadFormat))
	}
	swallow := int(vlen) + 2
	refused := Result{Status: StatusError, N: lineLen, Reply: replyBadFormat, Swallow: swallow}
	key := w[1]
	if !validKey(key) {
		return quiet(refused)
	}
	flags, ok := parseUint32(w[2])
	if !ok {
		return quiet(refused)
	}
	exp, ok := parseInt32(w[3])
	if !ok {
		return quiet(refused)
	}
	if kind == CmdCas {
		if cmd.Cas, ok = parseUint64(w[5]); !ok {
			return quiet(refused)
		}
	}
	cmd.Keys = append(cmd.Keys[:0], key)
	p.keys = cmd.Keys[:0]
	maxItem := p.MaxItemSize
	if maxItem <= 0 {
		maxItem = 1 << 20
	}
	if int(vlen) > maxItem {
		return quiet(Result{Status: StatusError, N: lineLen, Reply: replyTooLarge, Swallow: swallow, TooLarge: true})
	}
	total := lineLen + swallow
	if len(buf) < total {
		if p.MaxBuffered > 0 && total > p.MaxBuffered {
			return quiet(Result{Status: StatusError, N: lineLen, Reply: replyOutOfMemory, Swallow: swallow, TooLarge: true, NoMemory: true})
		}
		cmd.Keys = cmd.Keys[:0]
		return Result{Status: StatusNeedMore, Need: total}
	}
	if buf[total-2] != '\r' || buf[total-1] != '\n' {
		cmd.Keys = cmd.Keys[:0]
		return quiet(errorAt(total, replyBadDataChunk))
	}
	cmd.Flags, cmd.Exptime = flags, exp
	cmd.Data = buf[lineLen : total-2]
	return Result{Status: StatusOK, N: total}
}

// arithmetic parses incr|decr <key> <delta> [noreply].
func (p *Parser) arithmetic(kind CommandKind, w [][]byte, cmd *Command) Result {
	cmd.Kind = kind
	if len(w) != 3 && len(w) != 4 {
		return refuse(replyError)
	}
	cmd.NoReply = string(w[len(w)-1]) == "noreply"
	if !validKey(w[1]) {
		return refuse(replyBadFormat)
	}
	delta, ok := parseUint64(w[2])
	if !ok {
		return refuse(replyInvalidDelta)
	}
	cmd.Delta = delta
	cmd.Keys = append(cmd.Keys[:0], w[1])
	p.keys = cmd.Keys[:0]
	return Result{Status: StatusOK}
}

// delete parses delete <key> [0] [noreply]; the "0" is a legacy hold time that
// old clients still send.
func (p *Parser) delete(w [][]byte, cmd *Command) Result {
	cmd.Kind = CmdDelete
	if len(w) < 2 || len(w) > 4 {
		return refuse(replyError)
	}
	if len(w) > 2 {
		holdIsZero := string(w[2]) == "0"
		cmd.NoReply = string(w[len(w)-1]) == "noreply"
		valid := (len(w) == 3 && (holdIsZero || cmd.NoReply)) ||
			(len(w) == 4 && holdIsZero && cmd.NoReply)
		if !valid {
			return refuse(replyDeleteUsage)
		}
	}
	if !validKey(w[1]) {
		return refuse(replyBadFormat)
	}
	cmd.Keys = append(cmd.Keys[:0], w[1])
	p.keys = cmd.Keys[:0]
	return Result{Status: StatusOK}
}

// touch parses touch <key> <exptime> [noreply].
func (p *Parser) touch(w [][]byte, cmd *Command) Result {
	cmd.Kind = CmdTouch
	if len(w) != 3 && len(w) != 4 {
		return refuse(replyError)
	}
	cmd.NoReply = string(w[len(w)-1]) == "noreply"
	if !validKey(w[1]) {
		return refuse(replyBadFormat)
	}
	exp, ok := parseInt32(w[2])
	if !ok {
		return refuse(replyInvalidExptime)
	}
	cmd.Exptime = exp
	cmd.Keys = append(cmd.Keys[:0], w[1])
	p.keys = cmd.Keys[:0]
	return Result{Status: StatusOK}
}

// flushAll parses flush_all [delay] [noreply].
func (p *Parser) flushAll(w [][]byte, cmd *Command) Result {
	cmd.Kind = CmdFlushAll
	if len(w) > 3 {
		return refuse(replyError)
	}
	cmd.NoReply = string(w[len(w)-1]) == "noreply"
	args := 1
	if cmd.NoReply {
		args = 2
	}
	if len(w) != args {
		delay, ok := parseInt32(w[1])
		if !ok {
			return refuse(replyInvalidExptime)
		}
		cmd.Delay = max(delay, 0)
	}
	return Result{Status: StatusOK}
}

// verbosity parses verbosity <level> [noreply].
func (p *Parser) verbosity(w [][]byte, cmd *Command) Result {
	cmd.Kind = CmdVerbosity
	if len(w) != 2 && len(w) != 3 {
		return refuse(replyError)
	}
	cmd.NoReply = string(w[len(w)-1]) == "noreply"
	level, ok := parseUint32(w[1])
	if !ok {
		return refuse(replyBadFormat)
	}
	cmd.Level = int64(level)
	return Result{Status: StatusOK}
}
