package ndbmemcache

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A step is one write to a server: one command, or several pipelined, of
// the text or the binary protocol. After the step the client sends a
// sentinel of the same protocol (text `version`, binary NOOP with
// sentinelOpaque), in a write of its own, and the step's replies are all
// the bytes before the sentinel's reply: a server that answers a command
// twice, or not at all, does not shift the replies of the next steps.
type step struct {
	name  string
	text  string        // text protocol bytes; {cas:KEY} and {cas:KEY#N} are a captured cas
	bin   []binReq      // binary protocol requests, or nil
	sleep time.Duration // wait this long before the step
}

// binReq is a binary protocol request. cas names a captured cas ({cas:KEY}
// syntax without the braces) or is a number; "" is 0.
type binReq struct {
	op     byte
	key    string
	extras []byte
	value  []byte
	cas    string
}

const (
	opGet, opSet, opAdd, opReplace, opDelete, opIncr, opDecr = 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
	opQuit, opFlush, opGetq, opNoop, opVersion, opGetk       = 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c
	opGetkq, opAppend, opPrepend, opSetq, opAddq, opDeleteq  = 0x0d, 0x0e, 0x0f, 0x11, 0x12, 0x14
	opIncrq, opTouch                                         = 0x15, 0x1c
	sentinelOpaque                                           = 0xfeedface
)

// replyTimeout bounds a step's replies: a server still silent then is taken
// as hung.
const replyTimeout = 5 * time.Second

var opNames = map[byte]string{opGet: "GET", opSet: "SET", opAdd: "ADD", opReplace: "REPLACE", opDelete: "DELETE",
	opIncr: "INCR", opDecr: "DECR", opQuit: "QUIT", opFlush: "FLUSH", opGetq: "GETQ", opNoop: "NOOP", opVersion: "VERSION",
	opGetk: "GETK", opGetkq: "GETKQ", opAppend: "APPEND", opPrepend: "PREPEND", opSetq: "SETQ", opAddq: "ADDQ",
	opDeleteq: "DELETEQ", opIncrq: "INCRQ", opTouch: "TOUCH"}

// setExtras are a SET/ADD/REPLACE's flags and exptime.
func setExtras(flags, exptime uint32) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b, flags)
	binary.BigEndian.PutUint32(b[4:], exptime)
	return b
}

// incrExtras are an INCR/DECR's delta, initial value and exptime
// (0xffffffff: do not create a missing item).
func incrExtras(delta, initial uint64, exptime uint32) []byte {
	b := make([]byte, 20)
	binary.BigEndian.PutUint64(b, delta)
	binary.BigEndian.PutUint64(b[8:], initial)
	binary.BigEndian.PutUint32(b[16:], exptime)
	return b
}

// session is one server's run of one sequence: its connection and the cas
// values it captured, by key, in the order seen.
type session struct {
	addr string
	nc   net.Conn
	r    *bufio.Reader
	cas  map[string][]uint64
	tok  casTokens
}

func newSession(addr string) *session {
	return &session{addr: addr, cas: map[string][]uint64{}, tok: casTokens{}}
}

func (s *session) dial() error {
	if s.nc != nil {
		return nil
	}
	nc, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
	if err != nil {
		return err
	}
	s.nc, s.r = nc, bufio.NewReaderSize(nc, 1<<16)
	return nil
}

func (s *session) close() {
	if s.nc != nil {
		s.nc.Close()
		s.nc = nil
	}
}

// casTokens names a server's cas values per key, in the order it first
// returns them for the key (cas#1, cas#2, ...): two servers agree when
// their cas values change at the same replies, whatever the numbers. Zero
// stays 0.
type casTokens map[string]map[uint64]string

func (c casTokens) name(key string, v uint64) string {
	if v == 0 {
		return "0"
	}
	m := c[key]
	if m == nil {
		m = map[uint64]string{}
		c[key] = m
	}
	if n, ok := m[v]; ok {
		return n
	}
	n := fmt.Sprintf("cas#%d", len(m)+1)
	m[v] = n
	return n
}

// expand replaces {cas:KEY} (the last cas captured for KEY) and
// {cas:KEY#N} (the Nth, from 0) with the numbers.
func (s *session) expand(text string) string {
	var out strings.Builder
	for {
		i := strings.Index(text, "{cas:")
		if i < 0 {
			out.WriteString(text)
			return out.String()
		}
		j := strings.IndexByte(text[i:], '}')
		out.WriteString(text[:i])
		out.WriteString(strconv.FormatUint(s.casOf(text[i+5:i+j]), 10))
		text = text[i+j+1:]
	}
}

// casOf is the captured cas that ref (KEY or KEY#N) names, or 0.
func (s *session) casOf(ref string) uint64 {
	key, n := ref, -1
	if i := strings.LastIndexByte(ref, '#'); i >= 0 {
		if v, err := strconv.Atoi(ref[i+1:]); err == nil {
			key, n = ref[:i], v
		}
	}
	vals := s.cas[key]
	if len(vals) == 0 {
		return 0
	}
	if n < 0 || n >= len(vals) {
		return vals[len(vals)-1]
	}
	return vals[n]
}

func (s *session) capture(key string, cas uint64) {
	if cas == 0 {
		return
	}
	if v := s.cas[key]; len(v) == 0 || v[len(v)-1] != cas {
		s.cas[key] = append(v, cas)
	}
}

// exchange sends st and returns its replies, normalised: one string per
// reply (a text line, a VALUE...END block, a binary response). An error
// (a timeout, the server closing the connection) ends the list as a last
// "<...>" reply and drops the connection: the next step opens another.
func (s *session) exchange(st step) (sent string, replies []string) {
	if st.sleep > 0 {
		time.Sleep(st.sleep)
	}
	if err := s.dial(); err != nil {
		return st.text, []string{"<connect: " + err.Error() + ">"}
	}
	var req, sentinel []byte
	if st.bin != nil {
		var desc []string
		for i, b := range st.bin {
			req = append(req, s.encode(b, uint32(i+1))...)
			desc = append(desc, describeReq(b))
		}
		sent = strings.Join(desc, " | ")
		sentinel = s.encode(binReq{op: opNoop}, sentinelOpaque)
	} else {
		req = []byte(s.expand(st.text))
		sent = st.text
		sentinel = []byte("version\r\n")
	}
	_ = s.nc.SetDeadline(time.Now().Add(replyTimeout))
	_, err := s.nc.Write(req)
	if err == nil {
		_, err = s.nc.Write(sentinel)
	}
	if err == nil {
		if st.bin != nil {
			replies, err = s.readBinary(st.bin)
		} else {
			replies, err = s.readText()
		}
	}
	if err != nil {
		replies = append(replies, "<"+errText(err)+">")
		s.close()
	}
	return sent, replies
}

func errText(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection closed by the server"
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("no reply within %v", replyTimeout)
	}
	return err.Error()
}

// readText reads text replies up to the sentinel's VERSION line.
func (s *session) readText() ([]string, error) {
	var out []string
	var block bytes.Buffer // VALUE lines and data up to END
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if block.Len() > 0 || line != "" {
				out = append(out, block.String()+line)
			}
			return out, err
		}
		if strings.HasPrefix(line, "VERSION ") && block.Len() == 0 {
			return out, nil
		}
		if !strings.HasPrefix(line, "VALUE ") {
			block.WriteString(line)
			out = append(out, block.String())
			block.Reset()
			continue
		}
		// Split on spaces only, as memcached does: a key of several columns
		// holds tabs.
		f := strings.Fields(strings.ReplaceAll(strings.TrimRight(line, "\r\n"), "\t", "\x00"))
		for i := range f {
			f[i] = strings.ReplaceAll(f[i], "\x00", "\t")
		}
		if len(f) < 4 {
			block.WriteString(line)
			continue
		}
		n, err := strconv.Atoi(f[3])
		if err != nil || n < 0 {
			block.WriteString(line)
			continue
		}
		if len(f) == 5 { // gets: VALUE key flags bytes cas
			if v, err := strconv.ParseUint(f[4], 10, 64); err == nil {
				s.capture(f[1], v)
				f[4] = s.tok.name(f[1], v)
				line = strings.Join(f, " ") + "\r\n"
			}
		}
		block.WriteString(line)
		data := make([]byte, n+2)
		if _, err := io.ReadFull(s.r, data); err != nil {
			out = append(out, block.String())
			return out, err
		}
		block.Write(data)
	}
}

func (s *session) encode(b binReq, opaque uint32) []byte {
	var cas uint64
	if b.cas != "" {
		if v, err := strconv.ParseUint(b.cas, 10, 64); err == nil {
			cas = v
		} else {
			cas = s.casOf(b.cas)
		}
	}
	h := make([]byte, 24, 24+len(b.extras)+len(b.key)+len(b.value))
	h[0], h[1] = 0x80, b.op
	binary.BigEndian.PutUint16(h[2:], uint16(len(b.key)))
	h[4] = byte(len(b.extras))
	binary.BigEndian.PutUint32(h[8:], uint32(len(b.extras)+len(b.key)+len(b.value)))
	binary.BigEndian.PutUint32(h[12:], opaque)
	binary.BigEndian.PutUint64(h[16:], cas)
	h = append(h, b.extras...)
	h = append(h, b.key...)
	return append(h, b.value...)
}

// readBinary reads binary responses up to the sentinel NOOP's.
func (s *session) readBinary(reqs []binReq) ([]string, error) {
	var out []string
	for {
		h := make([]byte, 24)
		if _, err := io.ReadFull(s.r, h); err != nil {
			return out, err
		}
		body := make([]byte, binary.BigEndian.Uint32(h[8:]))
		if _, err := io.ReadFull(s.r, body); err != nil {
			return append(out, fmt.Sprintf("header % x, then %v", h, err)), err
		}
		op, opaque, cas := h[1], binary.BigEndian.Uint32(h[12:]), binary.BigEndian.Uint64(h[16:])
		if op == opNoop && opaque == sentinelOpaque {
			return out, nil
		}
		key := ""
		if opaque >= 1 && int(opaque) <= len(reqs) {
			key = reqs[opaque-1].key
			if binary.BigEndian.Uint16(h[6:]) == 0 {
				s.capture(key, cas)
			}
		}
		kl, el := int(binary.BigEndian.Uint16(h[2:])), int(h[4])
		var ext, rkey, val []byte
		if el+kl <= len(body) {
			ext, rkey, val = body[:el], body[el:el+kl], body[el+kl:]
		} else {
			val = body
		}
		status := binary.BigEndian.Uint16(h[6:])
		casName := "nonzero" // an error's cas is not one the key's item has
		if status == 0 || cas == 0 {
			casName = s.tok.name(key, cas)
		}
		r := fmt.Sprintf("magic=%02x op=%s status=0x%04x datatype=%02x opaque=%d cas=%s", h[0], opName(op),
			status, h[5], opaque, casName)
		if len(ext) > 0 {
			r += fmt.Sprintf(" extras=%x", ext)
		}
		if len(rkey) > 0 {
			r += " key=" + show(rkey)
		}
		if len(val) > 0 {
			if (op == opIncr || op == opDecr || op == opIncrq) && len(val) == 8 && status == 0 {
				r += fmt.Sprintf(" value=uint64(%d)", binary.BigEndian.Uint64(val))
			} else {
				r += " value=" + show(val)
			}
		}
		out = append(out, r)
	}
}

func opName(op byte) string {
	if n, ok := opNames[op]; ok {
		return n
	}
	return fmt.Sprintf("0x%02x", op)
}

func describeReq(b binReq) string {
	d := opName(b.op)
	if b.key != "" {
		d += " key=" + show([]byte(b.key))
	}
	if len(b.extras) > 0 {
		d += fmt.Sprintf(" extras=%x", b.extras)
	}
	if len(b.value) > 0 {
		d += " value=" + show(b.value)
	}
	if b.cas != "" {
		d += " cas={" + b.cas + "}"
	}
	return d
}

// show quotes b as Go does, with a run of 16 or more of the same byte as
// {c*N}: lossless, and short for the large values.
func show(b []byte) string {
	var out strings.Builder
	out.WriteByte('"')
	for i := 0; i < len(b); {
		j := i
		for j < len(b) && b[j] == b[i] {
			j++
		}
		if j-i >= 16 {
			q := strconv.Quote(string(b[i : i+1]))
			fmt.Fprintf(&out, "{%s*%d}", q[1:len(q)-1], j-i)
			i = j
			continue
		}
		q := strconv.Quote(string(b[i:j]))
		out.WriteString(q[1 : len(q)-1])
		i = j
	}
	out.WriteByte('"')
	return out.String()
}
