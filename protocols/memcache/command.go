// Package memcache implements memcached's protocols: pure parsers and encoders
// (bytes in, commands out, no I/O) and the server that drives them, which
// its transports (package transport) feed with bytes.
package memcache

// CommandKind names a parsed command.
type CommandKind uint8

const (
	CmdNone CommandKind = iota
	CmdGet
	CmdGets
	CmdGat
	CmdGats
	CmdSet
	CmdAdd
	CmdReplace
	CmdAppend
	CmdPrepend
	CmdCas
	CmdDelete
	CmdIncr
	CmdDecr
	CmdTouch
	CmdFlushAll
	CmdVersion
	CmdVerbosity
	CmdQuit
	CmdStats
	CmdNoop // binary NOOP
	CmdMetaGet
	CmdMetaSet
	CmdMetaDelete
	CmdMetaArithmetic
	CmdMetaNoop
	CmdMetaDebug
	CmdSaslList // binary SASL_LIST_MECHS
	CmdSaslAuth // binary SASL_AUTH: Keys[0] is the mechanism, Data the response
	CmdSaslStep // binary SASL_STEP
	numCommandKinds
)

// NumCommandKinds sizes per-command tables (metrics, stats).
const NumCommandKinds = int(numCommandKinds)

var commandNames = [numCommandKinds]string{
	"none", "get", "gets", "gat", "gats", "set", "add", "replace", "append", "prepend",
	"cas", "delete", "incr", "decr", "touch", "flush_all", "version", "verbosity", "quit", "stats", "noop",
	"mg", "ms", "md", "ma", "mn", "me", "sasl_list_mechs", "sasl_auth", "sasl_step",
}

func (k CommandKind) String() string {
	if k < numCommandKinds {
		return commandNames[k]
	}
	return "unknown"
}

// IsStorage reports whether the command carries a data block.
func (k CommandKind) IsStorage() bool {
	return k >= CmdSet && k <= CmdCas
}

// IsMeta reports whether the command is one of the meta protocol's.
func (k CommandKind) IsMeta() bool { return k >= CmdMetaGet && k <= CmdMetaDebug }

// IsRetrieval reports whether the command is get, gets, gat or gats.
func (k CommandKind) IsRetrieval() bool { return k >= CmdGet && k <= CmdGats }

// Command is one parsed request. Its byte slices alias the parser's input buffer:
// they are valid only until that buffer is consumed, so a server that completes a
// command later must copy what it needs first.
type Command struct {
	Kind CommandKind
	// Keys holds every key of a retrieval command; storage, delete, incr, decr and
	// touch have exactly one. The slice is owned by the Parser and reused.
	Keys [][]byte
	// Next, after ParseFrom, is where the retrieval's key after Keys starts,
	// in bytes past the start of its line's first key; 0 when Keys end it.
	Next int
	// Flags is the client's opaque 32-bit flags (storage commands).
	Flags uint32
	// Exptime is as the client sent it: 0 never, negative already expired,
	// <= 30 days relative seconds, larger an absolute Unix time.
	Exptime int64
	// Data is the data block without its trailing "\r\n" (storage commands).
	Data []byte
	// Cas is the compare value of the cas command.
	Cas uint64
	// Delta is the amount of incr/decr.
	Delta uint64
	// Delay is flush_all's optional delay (0 if absent); Level is verbosity's level.
	Delay int64
	Level int64
	// Arg is the stats sub-command ("" for general stats, "settings", ...);
	// for text stats, Arg2 is the word after it ("on" in "stats detail on").
	Arg  []byte
	Arg2 []byte
	// NoReply is set when the command ended with "noreply" (text) or is a quiet
	// opcode (binary).
	NoReply bool

	// Binary protocol only: the request's opcode and opaque (echoed in replies),
	// whether it is a quiet variant, whether replies carry the key, and for
	// incr/decr whether a missing key is created with Initial.
	Binary  bool
	Opcode  uint8
	Opaque  uint32
	Quiet   bool
	WithKey bool
	Create  bool
	Initial uint64

	// Meta protocol only: the flags.
	Meta MetaFlags
}
