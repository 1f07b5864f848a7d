package memcache

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/ndbgate/ndbgate/internal/shardmetrics"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
)

// captureTransport keeps every reply sent.
type captureTransport struct{ out []byte }

func (c *captureTransport) Output() []byte { return nil }
func (c *captureTransport) Send(b []byte)  { c.out = append(c.out, b...) }
func (c *captureTransport) Wake()          {}
func (c *captureTransport) Backlog() int   { return 0 }
func (c *captureTransport) WakeWhenSent()  {}

// fuzzConn is a connection to a server on a fresh embedded engine (closed
// when t ends), its replies kept by tr.
func fuzzConn(t *testing.T, tr *captureTransport) *connState {
	e := embedded.New(embedded.Config{Partitions: 2})
	t.Cleanup(func() { _ = e.Close() })
	srv := NewServer(Config{Version: "fuzz", MaxPending: 8}, newDemoService(t, e), discardLog)
	return srv.newConnState(tr, shardmetrics.SharedShard, nil)
}

// serveCut serves in on cs in two reads, cut anywhere (cut), as a socket
// may deliver it: what a serve leaves waits for more. Every byte must be
// served.
func serveCut(t *testing.T, cs *connState, in []byte, cut uint16) {
	at := int(cut) % (len(in) + 1)
	var buf []byte
	for _, chunk := range [][]byte{in[:at], in[at:]} {
		buf = append(buf, chunk...)
		for len(buf) > 0 {
			n := cs.serve(buf)
			cs.flush()
			if n == 0 {
				break
			}
			buf = buf[n:]
		}
	}
	if len(buf) > 0 {
		t.Fatalf("%d bytes never served", len(buf))
	}
}

// FuzzBinaryRuns drives a connection with pipelined binary gets, sets and
// deletes on a few keys, the input cut where the fuzzer says, and checks
// every reply against a model of memcached: runs of gets and sets
// (batchRun) must answer each command in order, as if each ran alone.
func FuzzBinaryRuns(f *testing.F) {
	f.Add([]byte{0x02, 0x00, 0x0a, 0x08, 0x03, 0x12, 0x00, 0x04}, uint16(3))
	f.Add([]byte{0x02, 0x01, 0x02, 0x09, 0x0b, 0x11, 0x00, 0x08, 0x10, 0x18}, uint16(40))
	f.Add([]byte{0x03, 0x03, 0x01, 0x04, 0x00, 0x02, 0x0a, 0x12, 0x1a, 0x01, 0x00}, uint16(0))
	f.Fuzz(func(t *testing.T, script []byte, cut uint16) {
		tr := &captureTransport{}
		cs := fuzzConn(t, tr)

		type want struct {
			op     uint8
			opaque uint32
			status uint16
			value  string
		}
		model := map[string]string{}
		var in []byte
		var wants []want
		for i, b := range script {
			if i == 200 {
				break
			}
			key := fmt.Sprintf("k%d", b>>3&3)
			opaque := uint32(i)
			switch b & 7 {
			case 0, 1: // GET, GETQ
				op := []uint8{opGet, opGetQ}[b&1]
				in = append(in, binReq(op, []byte(key), nil, nil, opaque, 0)...)
				v, ok := model[key]
				switch {
				case ok:
					wants = append(wants, want{op, opaque, statusOK, v})
				case op == opGet:
					wants = append(wants, want{op, opaque, statusKeyNotFound, ""})
				}
			case 2, 3: // SET, SETQ
				op := []uint8{opSet, opSetQ}[b&1]
				v := fmt.Sprintf("v%d", i)
				in = append(in, binReq(op, []byte(key), setExtras(0, 0), []byte(v), opaque, 0)...)
				model[key] = v
				if op == opSet {
					wants = append(wants, want{op, opaque, statusOK, ""})
				}
			case 4: // DELETE
				in = append(in, binReq(opDelete, []byte(key), nil, nil, opaque, 0)...)
				if _, ok := model[key]; ok {
					wants = append(wants, want{opDelete, opaque, statusOK, ""})
				} else {
					wants = append(wants, want{opDelete, opaque, statusKeyNotFound, ""})
				}
				delete(model, key)
			default: // NOOP
				in = append(in, binReq(opNoop, nil, nil, nil, opaque, 0)...)
				wants = append(wants, want{opNoop, opaque, statusOK, ""})
			}
		}
		serveCut(t, cs, in, cut)
		out := tr.out
		for i, w := range wants {
			if len(out) < binHeaderLen {
				t.Fatalf("reply %d (opaque %d): missing", i, w.opaque)
			}
			bodyLen := int(binary.BigEndian.Uint32(out[8:]))
			r, rest := decodeResp(t, out[:binHeaderLen+bodyLen])
			out = append(rest, out[binHeaderLen+bodyLen:]...)
			if r.op != w.op || r.opaque != w.opaque || r.status != w.status || r.status == statusOK && string(r.vb) != w.value {
				t.Fatalf("reply %d: got op %#x opaque %d status %#x value %q, want op %#x opaque %d status %#x value %q",
					i, r.op, r.opaque, r.status, r.vb, w.op, w.opaque, w.status, w.value)
			}
		}
		if len(out) > 0 {
			t.Fatalf("%d bytes of replies beyond the %d expected", len(out), len(wants))
		}
	})
}

// FuzzTextRuns is FuzzBinaryRuns for text: pipelined one-key gets and gets
// and sets, noreply or not (which run as batches), multi-key gets, deletes
// and version on a few keys, the input cut where the fuzzer says; the
// replies must be memcached's for each command alone, in order.
func FuzzTextRuns(f *testing.F) {
	f.Add([]byte{0x00, 0x08, 0x02, 0x00, 0x01, 0x10, 0x03, 0x00}, uint16(5))
	f.Add([]byte{0x02, 0x00, 0x00, 0x04, 0x00, 0x01, 0x01, 0x05, 0x00}, uint16(30))
	f.Add([]byte{0x06, 0x00, 0x0a, 0x12, 0x07, 0x01, 0x09}, uint16(0))
	f.Fuzz(func(t *testing.T, script []byte, cut uint16) {
		tr := &captureTransport{}
		cs := fuzzConn(t, tr)

		model := map[string]string{}
		value := func(key string, cas bool) string {
			v, ok := model[key]
			switch {
			case !ok:
				return ""
			case cas:
				return fmt.Sprintf("VALUE %s 0 %d *\r\n%s\r\n", key, len(v), v)
			default:
				return fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\n", key, len(v), v)
			}
		}
		var in, want []byte
		for i, b := range script {
			if i == 200 {
				break
			}
			key := fmt.Sprintf("k%d", b>>3&3)
			switch b & 7 {
			case 0, 1: // get, gets
				verb := []string{"get", "gets"}[b&1]
				in = fmt.Appendf(in, "%s %s\r\n", verb, key)
				want = fmt.Appendf(want, "%sEND\r\n", value(key, b&1 == 1))
			case 2: // get of two keys
				other := fmt.Sprintf("k%d", b>>5&3)
				in = fmt.Appendf(in, "get %s %s\r\n", key, other)
				want = fmt.Appendf(want, "%s%sEND\r\n", value(key, false), value(other, false))
			case 3, 4: // set, set noreply
				v := fmt.Sprintf("v%d", i)
				if b&7 == 3 {
					in = fmt.Appendf(in, "set %s 0 0 %d\r\n%s\r\n", key, len(v), v)
					want = append(want, "STORED\r\n"...)
				} else {
					in = fmt.Appendf(in, "set %s 0 0 %d noreply\r\n%s\r\n", key, len(v), v)
				}
				model[key] = v
			case 5: // delete
				in = fmt.Appendf(in, "delete %s\r\n", key)
				if _, ok := model[key]; ok {
					want = append(want, "DELETED\r\n"...)
				} else {
					want = append(want, "NOT_FOUND\r\n"...)
				}
				delete(model, key)
			default:
				in = append(in, "version\r\n"...)
				want = append(want, "VERSION fuzz\r\n"...)
			}
		}
		serveCut(t, cs, in, cut)
		// A gets line's cas is the server's: compare it as "*".
		lines := strings.SplitAfter(string(tr.out), "\r\n")
		for i, l := range lines {
			if f := strings.Fields(l); len(f) == 5 && f[0] == "VALUE" {
				lines[i] = strings.Join(append(f[:4], "*"), " ") + "\r\n"
			}
		}
		if got := strings.Join(lines, ""); got != string(want) {
			t.Fatalf("input %q\ngot  %q\nwant %q", in, got, want)
		}
	})
}
