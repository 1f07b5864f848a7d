package e2e

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRandomBinaryConversationsMatchMemcached is
// TestRandomConversationsMatchMemcached for the binary protocol: seeded
// random conversations of binary commands, quiet ones among them, each
// followed by a NOOP (odd seeds) or in runs of up to eight ended by one
// (even seeds), whose replies, opaque included, and counters are compared
// with memcached's. cas
// values are compared as the order each server first showed them; a
// request's cas is that server's latest for the key, 0, or one neither
// made.
func TestRandomBinaryConversationsMatchMemcached(t *testing.T) {
	conformanceRun(t, converseBinary, 200)
}

// converseBinary is converse for the binary protocol.
func converseBinary(t *testing.T, seed, attempt int, refAddr, gwAddr string) string {
	rng := rand.New(rand.NewSource(int64(seed)))
	conv := &binConversation{rng: rng, prefix: fmt.Sprintf("bf%d.%d:", seed, attempt)}
	ref, gw := newBinSpeaker(t, refAddr), newBinSpeaker(t, gwAddr)
	defer ref.c.close()
	defer gw.c.close()
	var sent []string
	for i := 0; i < 60; {
		run := runLength(seed, rng)
		reqs := make([]binReq, run)
		for k := range reqs {
			reqs[k] = conv.next()
			sent = append(sent, reqs[k].String())
		}
		want, got := ref.say(reqs), gw.say(reqs)
		if want != got {
			touched, arith := make([][]string, run), make([]bool, run)
			for k, r := range reqs {
				touched[k] = []string{string(r.key)}
				switch r.op {
				case 0x05, 0x06, 0x15, 0x16: // INCR, DECR, INCRQ, DECRQ
					arith[k] = true
				}
			}
			if memcachedSignBug(t, refAddr, want, got, "status=6 ", touched, arith) {
				return signBugExcuse(i, i+run-1)
			}
			return fmt.Sprintf("seed %d, commands %d-%d: replies differ\nconversation:\n  %s\nmemcached: %s\nndbgate:   %s",
				seed, i, i+run-1, strings.Join(sent, "\n  "), want, got)
		}
		i += run
	}
	return ""
}

// binReq is one binary request of a conversation; casOf names the key whose
// latest cas the request carries ("" for cas, as given).
type binReq struct {
	op                 byte
	key, extras, value []byte
	cas                uint64
	casOf              string
}

var binOpNames = map[byte]string{0x00: "GET", 0x01: "SET", 0x02: "ADD", 0x03: "REPLACE", 0x04: "DELETE", 0x05: "INCR",
	0x06: "DECR", 0x09: "GETQ", 0x0c: "GETK", 0x0d: "GETKQ", 0x0e: "APPEND", 0x0f: "PREPEND", 0x11: "SETQ", 0x12: "ADDQ",
	0x13: "REPLACEQ", 0x14: "DELETEQ", 0x15: "INCRQ", 0x16: "DECRQ", 0x19: "APPENDQ", 0x1a: "PREPENDQ", 0x1c: "TOUCH",
	0x1d: "GAT", 0x1e: "GATQ", 0x23: "GATK", 0x24: "GATKQ"}

func (r binReq) String() string {
	cas := strconv.FormatUint(r.cas, 10)
	if r.casOf != "" {
		cas = "latest of " + r.casOf
	}
	return fmt.Sprintf("%s key=%s extras=%x value=%q cas=%s", binOpNames[r.op], r.key, r.extras, r.value, cas)
}

// binSpeaker is one server's side of a binary conversation.
type binSpeaker struct {
	c    *rawConn
	cas  map[string]uint64
	seen map[uint64]int
}

func newBinSpeaker(t *testing.T, addr string) *binSpeaker {
	return &binSpeaker{c: dialRaw(t, addr), cas: map[string]uint64{}, seen: map[uint64]int{}}
}

// say sends reqs and a NOOP and returns the replies before the NOOP's,
// normalized: each as opcode, status, extras, key and value, and its cas as
// the order this server first showed it. A request's cas is the one the
// server showed for its key before the run.
func (s *binSpeaker) say(reqs []binReq) string {
	var run []byte
	for k, req := range reqs {
		cas := req.cas
		if req.casOf != "" {
			cas = s.cas[req.casOf] // 0 when none was shown
		}
		b := binRequest(req.op, req.key, req.extras, req.value, uint32(k))
		binary.BigEndian.PutUint64(b[16:], cas)
		run = append(run, b...)
	}
	s.c.send(string(run) + string(binRequest(0x0a, nil, nil, nil, 0)))
	var out strings.Builder
	for {
		hdr, err := s.c.readN(24)
		require.NoError(s.c.t, err)
		require.Equal(s.c.t, byte(0x81), hdr[0], "response magic")
		op := hdr[1]
		if op == 0x0a {
			return out.String()
		}
		keyLen := int(binary.BigEndian.Uint16([]byte(hdr[2:4])))
		extLen := int(hdr[4])
		status := binary.BigEndian.Uint16([]byte(hdr[6:8]))
		body, err := s.c.readN(int(binary.BigEndian.Uint32([]byte(hdr[8:12]))))
		require.NoError(s.c.t, err)
		respCas := binary.BigEndian.Uint64([]byte(hdr[16:24]))
		opaque := binary.BigEndian.Uint32([]byte(hdr[12:16]))
		require.Less(s.c.t, int(opaque), len(reqs), "a reply's opaque names no request of the run")
		req := reqs[opaque]
		token := "0"
		if respCas != 0 {
			if status == 0 && len(req.key) > 0 {
				s.cas[string(req.key)] = respCas
			}
			n, ok := s.seen[respCas]
			if !ok {
				n = len(s.seen) + 1
				s.seen[respCas] = n
			}
			token = "#" + strconv.Itoa(n)
		}
		// memcached pads a number a decrement shortened with spaces, where
		// ndbgate stores it as it is; the conversation's values have none.
		value := strings.ReplaceAll(body[extLen+keyLen:], " ", "")
		fmt.Fprintf(&out, "[#%d %s status=%d extras=%x key=%q value=%q cas=%s] ", opaque, binOpNames[op], status,
			body[:extLen], body[extLen:extLen+keyLen], value, token)
	}
}

// binConversation makes random binary commands over a few keys of its own.
// Only keys 0 and 1 are incremented, and only the others appended to
// (memcached pads a number a decrement shortened, ndbgate does not).
type binConversation struct {
	rng    *rand.Rand
	prefix string
}

func (c *binConversation) pick(choices ...byte) byte { return choices[c.rng.Intn(len(choices))] }

// key is one of the conversation's four keys (a counter: 0 or 1); key 3
// is 250 bytes long, memcached's longest.
func (c *binConversation) key(counter bool) []byte {
	n := c.rng.Intn(4)
	if counter {
		n = c.rng.Intn(2)
	}
	if n == 3 {
		return []byte(c.prefix + "3" + strings.Repeat("k", 249-len(c.prefix)))
	}
	return []byte(c.prefix + strconv.Itoa(n))
}

func (c *binConversation) value() []byte {
	switch c.rng.Intn(5) {
	case 0:
		return nil
	case 1, 2:
		return []byte(strconv.Itoa(c.rng.Intn(1000)))
	case 3:
		return []byte("18446744073709551610")
	default:
		n := 1 + c.rng.Intn(8)
		if c.rng.Intn(8) == 0 {
			n = 1 + c.rng.Intn(12000) // as the text conversations' values
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = "abcdefgh"[c.rng.Intn(8)]
		}
		return b
	}
}

// exptime: never, or far enough ahead that a test never sees it pass.
func (c *binConversation) exptime() uint32 { return []uint32{0, 0, 1000}[c.rng.Intn(3)] }

// withCas gives req the key's latest cas on each server, 0 (none), or one
// neither made.
func (c *binConversation) withCas(req binReq) binReq {
	switch c.rng.Intn(4) {
	case 0:
		req.casOf = string(req.key)
	case 1:
		req.cas = 1<<64 - 1
	}
	return req
}

func (c *binConversation) next() binReq {
	be32 := binary.BigEndian.AppendUint32
	be64 := binary.BigEndian.AppendUint64
	switch c.rng.Intn(9) {
	case 0, 1:
		op := c.pick(0x01, 0x01, 0x02, 0x03, 0x11, 0x12, 0x13)
		k := c.key(false)
		extras := be32(be32(nil, []uint32{0, 5, 1<<32 - 1}[c.rng.Intn(3)]), c.exptime())
		return c.withCas(binReq{op: op, key: k, extras: extras, value: c.value()})
	case 2:
		k := c.key(false)
		if string(k) == c.prefix+"0" || string(k) == c.prefix+"1" {
			return binReq{op: 0x00, key: k}
		}
		v := c.value()
		v = v[:min(len(v), 20)] // as the text conversations' appends
		return c.withCas(binReq{op: c.pick(0x0e, 0x0f, 0x19, 0x1a), key: k, value: v})
	case 3, 4:
		return binReq{op: c.pick(0x00, 0x09, 0x0c, 0x0d), key: c.key(false)}
	case 5:
		return binReq{op: c.pick(0x1c, 0x1d, 0x1e, 0x23, 0x24), key: c.key(false), extras: be32(nil, c.exptime())}
	case 6:
		return c.withCas(binReq{op: c.pick(0x04, 0x14), key: c.key(false)})
	default:
		exp := []uint32{0, 1000, 0xffffffff}[c.rng.Intn(3)] // 0xffffffff: do not create
		delta := []uint64{0, 1, 7, 1<<64 - 1}[c.rng.Intn(4)]
		extras := be32(be64(be64(nil, delta), uint64(c.rng.Intn(20))), exp)
		return c.withCas(binReq{op: c.pick(0x05, 0x06, 0x15, 0x16), key: c.key(true), extras: extras})
	}
}
