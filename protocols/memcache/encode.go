package memcache

import "strconv"

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
