// The parser's shared parts: Parser and Result, and the key and number checks
// every dialect's parser uses. Parsing is pure (bytes in, a Command out, no
// I/O), one file a dialect: text_parse.go, meta_parse.go, binary_parse.go.

package memcache

// Status is the outcome of one Parse call.
type Status uint8

const (
	// StatusOK: a whole command was parsed into the Command.
	StatusOK Status = iota
	// StatusNeedMore: the buffer holds no whole command yet; call again with more.
	StatusNeedMore
	// StatusError: the command was refused. Reply (if any) goes back to the client,
	// Swallow bytes after N are discarded, and Close ends the connection.
	StatusError
)

// Result tells the caller what Parse did.
type Result struct {
	Status Status
	// N is the number of bytes consumed from the buffer.
	N int
	// Reply is the error reply, nil when the client asked for noreply or when
	// memcached sends nothing.
	Reply []byte
	// Swallow is how many bytes after N belong to a refused data block.
	Swallow int
	// Close is set when memcached would close the connection.
	Close bool
	// TooLarge marks a storage command refused for its size (over the item
	// size, or more than MaxBuffered to receive); memcached then also drops
	// the old item of a set so a stale value is never served.
	TooLarge bool
	// NoMemory marks, beside TooLarge, a refusal for the memory to receive
	// the value (over MaxBuffered), not for its size: memcached counts the
	// two apart (store_no_memory, store_too_large), noreply or not.
	NoMemory bool
	// Need is, with StatusNeedMore, the length of the whole command when its
	// header says it (a storage command's data block); 0 when unknown.
	Need int
}

const (
	// KeyMaxLength is memcached's key length limit.
	KeyMaxLength = 250
	// maxLine is how long memcached lets a line grow without a newline before it
	// decides the client is not speaking its protocol (multi-key gets excepted).
	maxLine = 2048
	// maxGetLine bounds a multi-key get line, which memcached leaves unbounded.
	maxGetLine = 1 << 20
	// maxWords is memcached's token limit (24 tokens including its terminator).
	maxWords = 23
)

// Parser parses memcached's text protocol. It is pure: bytes in, commands out, no
// I/O, and no allocation once its key slice has grown to the largest multi-get.
// The zero value is ready to use; MaxItemSize 0 means 1 MiB.
type Parser struct {
	MaxItemSize int
	// MaxBuffered, when > 0, is how long a storage command may be whose data
	// block has not all arrived: a longer one is refused as memcached refuses
	// a value it has no memory for, and its data swallowed, rather than held
	// while it arrives. The connection sets it from the server's budget for
	// partly received values.
	MaxBuffered int
	keys        [][]byte
	words       [maxWords + 1][]byte
	reply       []byte             // scratch for binary error replies
	b64         [KeyMaxLength]byte // a meta command's decoded base64 key
}

func errorAt(n int, reply []byte) Result {
	return Result{Status: StatusError, N: n, Reply: reply}
}

func refuse(reply []byte) Result { return Result{Status: StatusError, Reply: reply} }

// validKey enforces memcached's 250-byte limit and, stricter than memcached,
// refuses control characters, which no NDB key column should hold, but for
// the tab: it separates the columns of a key of several, as ndbmemcache's
// containers join them.
func validKey(k []byte) bool {
	if len(k) == 0 || len(k) > KeyMaxLength {
		return false
	}
	for _, c := range k {
		if c < 0x21 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// The number parsers read a token as memcached 1.6.18's safe_strto*
// functions do, through C's strtoull and strtol: an optional sign, then
// decimal digits, and a magnitude that fits 64 bits (ERANGE otherwise). The
// result is then assigned to the field's C type, which truncates it, as
// memcached does: flags of 4294967297 are 1, an exptime of 4294967296 is 0.

// cNumber splits a token into strtoull's sign and magnitude.
func cNumber(b []byte) (mag uint64, neg, ok bool) {
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false, false
	}
	for _, c := range b { // leading zeros are digits like any other
		d := uint64(c - '0')
		if d > 9 || mag > (^uint64(0)-d)/10 {
			return 0, false, false
		}
		mag = mag*10 + d
	}
	return mag, neg, true
}

// parseUint64 is safe_strtoull: strtoull negates after a '-', and
// memcached refuses the result only when it is negative as a signed number
// ("-0" is 0, "-5" is refused).
func parseUint64(b []byte) (uint64, bool) {
	mag, neg, ok := cNumber(b)
	if !ok {
		return 0, false
	}
	if neg {
		mag = -mag
		if int64(mag) < 0 {
			return 0, false
		}
	}
	return mag, true
}

// parseUint32 is safe_strtoul into a uint32: strtoul's 64-bit result,
// truncated.
func parseUint32(b []byte) (uint32, bool) {
	n, ok := parseUint64(b)
	return uint32(n), ok
}

// parseInt64 is strtol: a signed 64-bit value, refused past its range.
func parseInt64(b []byte) (int64, bool) {
	mag, neg, ok := cNumber(b)
	switch {
	case !ok:
		return 0, false
	case neg && mag > 1<<63, !neg && mag > 1<<63-1:
		return 0, false // ERANGE
	case neg:
		return int64(-mag), true // -(1<<63) wraps to itself
	}
	return int64(mag), true
}

// parseInt32 is safe_strtol into an int32: strtol's result, truncated.
func parseInt32(b []byte) (int64, bool) {
	n, ok := parseInt64(b)
	return int64(int32(n)), ok
}
