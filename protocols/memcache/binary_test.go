package memcache

import (
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/internal/shardmetrics"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// binReq builds a request packet.
func binReq(op uint8, key, extras, value []byte, opaque uint32, cas uint64) []byte {
	h := make([]byte, binHeaderLen)
	h[0], h[1] = binReqMagic, op
	binary.BigEndian.PutUint16(h[2:], uint16(len(key)))
	h[4] = byte(len(extras))
	binary.BigEndian.PutUint32(h[8:], uint32(len(extras)+len(key)+len(value)))
	binary.BigEndian.PutUint32(h[12:], opaque)
	binary.BigEndian.PutUint64(h[16:], cas)
	return append(append(append(h, extras...), key...), value...)
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func setExtras(flags, exp uint32) []byte { return append(be32(flags), be32(exp)...) }

func incrExtras(delta, initial uint64, exp uint32) []byte {
	b := binary.BigEndian.AppendUint64(nil, delta)
	b = binary.BigEndian.AppendUint64(b, initial)
	return append(b, be32(exp)...)
}

// binResp is a decoded response packet.
type binResp struct {
	op              uint8
	status          uint16
	opaque          uint32
	cas             uint64
	extras, key, vb []byte
}

func decodeResp(t *testing.T, b []byte) (binResp, []byte) {
	t.Helper()
	require.GreaterOrEqual(t, len(b), binHeaderLen, "short response")
	require.Equal(t, byte(binResMagic), b[0], "response magic")
	require.Equal(t, byte(0), b[5], "datatype")
	kl, el := int(binary.BigEndian.Uint16(b[2:])), int(b[4])
	bl := int(binary.BigEndian.Uint32(b[8:]))
	require.GreaterOrEqual(t, len(b), binHeaderLen+bl)
	body := b[binHeaderLen : binHeaderLen+bl]
	return binResp{
		op: b[1], status: binary.BigEndian.Uint16(b[6:]), opaque: binary.BigEndian.Uint32(b[12:]),
		cas: binary.BigEndian.Uint64(b[16:]), extras: body[:el], key: body[el : el+kl], vb: body[el+kl:],
	}, b[binHeaderLen+bl:]
}

func TestParseBinaryOpcodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want Command
		key  string
		data string
	}{
		{"get", binReq(opGet, []byte("k"), nil, nil, 7, 0), Command{Kind: CmdGet, Opcode: opGet, Opaque: 7}, "k", ""},
		{"getq", binReq(opGetQ, []byte("k"), nil, nil, 1, 0), Command{Kind: CmdGet, Opcode: opGetQ, Opaque: 1, Quiet: true, NoReply: true}, "k", ""},
		{"getk", binReq(opGetK, []byte("k"), nil, nil, 1, 0), Command{Kind: CmdGet, Opcode: opGetK, Opaque: 1, WithKey: true}, "k", ""},
		{"getkq", binReq(opGetKQ, []byte("k"), nil, nil, 1, 0), Command{Kind: CmdGet, Opcode: opGetKQ, Opaque: 1, WithKey: true, Quiet: true, NoReply: true}, "k", ""},
		{"set", binReq(opSet, []byte("k"), setExtras(5, 60), []byte("val"), 2, 0), Command{Kind: CmdSet, Opcode: opSet, Opaque: 2, Flags: 5, Exptime: 60}, "k", "val"},
		{"set with cas is cas", binReq(opSet, []byte("k"), setExtras(0, 0), []byte("v"), 2, 99), Command{Kind: CmdCas, Opcode: opSet, Opaque: 2, Cas: 99}, "k", "v"},
		{"addq", binReq(opAddQ, []byte("k"), setExtras(0, 0), []byte("v"), 3, 0), Command{Kind: CmdAdd, Opcode: opAddQ, Opaque: 3, Quiet: true, NoReply: true}, "k", "v"},
		{"replace", binReq(opReplace, []byte("k"), setExtras(0, 0), nil, 3, 0), Command{Kind: CmdReplace, Opcode: opReplace, Opaque: 3}, "k", ""},
		{"append", binReq(opAppend, []byte("k"), nil, []byte("x"), 3, 0), Command{Kind: CmdAppend, Opcode: opAppend, Opaque: 3}, "k", "x"},
		{"prependq", binReq(opPrependQ, []byte("k"), nil, []byte("x"), 3, 0), Command{Kind: CmdPrepend, Opcode: opPrependQ, Opaque: 3, Quiet: true, NoReply: true}, "k", "x"},
		{"delete with cas", binReq(opDelete, []byte("k"), nil, nil, 4, 12), Command{Kind: CmdDelete, Opcode: opDelete, Opaque: 4, Cas: 12}, "k", ""},
		{"incr create", binReq(opIncrement, []byte("n"), incrExtras(2, 10, 0), nil, 5, 0), Command{Kind: CmdIncr, Opcode: opIncrement, Opaque: 5, Delta: 2, Initial: 10, Create: true}, "n", ""},
		{"decr no create", binReq(opDecrementQ, []byte("n"), incrExtras(2, 10, noCreate), nil, 5, 0), Command{Kind: CmdDecr, Opcode: opDecrementQ, Opaque: 5, Delta: 2, Initial: 10, Quiet: true, NoReply: true}, "n", ""},
		{"touch", binReq(opTouch, []byte("k"), be32(100), nil, 6, 0), Command{Kind: CmdTouch, Opcode: opTouch, Opaque: 6, Exptime: 100}, "k", ""},
		{"gatkq", binReq(opGATKQ, []byte("k"), be32(100), nil, 6, 0), Command{Kind: CmdGat, Opcode: opGATKQ, Opaque: 6, Exptime: 100, WithKey: true, Quiet: true, NoReply: true}, "k", ""},
		{"flush with delay", binReq(opFlush, nil, be32(30), nil, 8, 0), Command{Kind: CmdFlushAll, Opcode: opFlush, Opaque: 8, Delay: 30}, "", ""},
		{"flushq", binReq(opFlushQ, nil, nil, nil, 8, 0), Command{Kind: CmdFlushAll, Opcode: opFlushQ, Opaque: 8, Quiet: true, NoReply: true}, "", ""},
		{"noop", binReq(opNoop, nil, nil, nil, 9, 0), Command{Kind: CmdNoop, Opcode: opNoop, Opaque: 9}, "", ""},
		{"version", binReq(opVersion, nil, nil, nil, 9, 0), Command{Kind: CmdVersion, Opcode: opVersion, Opaque: 9}, "", ""},
		{"quitq", binReq(opQuitQ, nil, nil, nil, 9, 0), Command{Kind: CmdQuit, Opcode: opQuitQ, Opaque: 9, Quiet: true, NoReply: true}, "", ""},
		{"verbosity", binReq(opVerbosity, nil, be32(2), nil, 9, 0), Command{Kind: CmdVerbosity, Opcode: opVerbosity, Opaque: 9, Level: 2}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Whole, then a byte at a time.
			for cut := 0; cut <= len(tc.in); cut++ {
				var p Parser
				var cmd Command
				res := p.ParseBinary(tc.in[:cut], &cmd)
				if cut < len(tc.in) {
					require.Equal(t, StatusNeedMore, res.Status, "prefix %d", cut)
					continue
				}
				require.Equal(t, StatusOK, res.Status)
				require.Equal(t, len(tc.in), res.N)
				assert.Equal(t, tc.data, string(cmd.Data))
				if tc.key == "" {
					assert.Empty(t, cmd.Keys)
				} else {
					require.Len(t, cmd.Keys, 1)
					assert.Equal(t, tc.key, string(cmd.Keys[0]))
				}
				cmd.Keys, cmd.Data = nil, nil
				tc.want.Binary = true
				assert.Equal(t, tc.want, cmd)
			}
		})
	}
	var p Parser
	var cmd Command
	res := p.ParseBinary(binReq(opStat, []byte("settings"), nil, nil, 1, 0), &cmd)
	require.Equal(t, StatusOK, res.Status)
	assert.Equal(t, "settings", string(cmd.Arg))
	assert.Empty(t, cmd.Keys)
}

func TestParseBinaryBadInput(t *testing.T) {
	p := Parser{MaxItemSize: 100}
	var cmd Command

	// A truncated header waits for more.
	res := p.ParseBinary(binReq(opGet, []byte("k"), nil, nil, 1, 0)[:23], &cmd)
	assert.Equal(t, StatusNeedMore, res.Status)

	// A body over the item size max: E2BIG once the header and key are in, and
	// the value is swallowed.
	big := binReq(opSet, []byte("k"), setExtras(0, 0), make([]byte, 101), 3, 0)
	res = p.ParseBinary(big[:33], &cmd)
	require.Equal(t, StatusError, res.Status)
	assert.Equal(t, 33, res.N)
	assert.Equal(t, 101, res.Swallow)
	assert.True(t, res.TooLarge)
	r, rest := decodeResp(t, res.Reply)
	assert.Equal(t, uint16(statusTooLarge), r.status)
	assert.Equal(t, uint32(3), r.opaque)
	assert.Equal(t, "Too large.", string(r.vb))
	assert.Empty(t, rest)

	// An unknown opcode: 0x81, body skipped, connection kept.
	res = p.ParseBinary(binReq(0x55, []byte("k"), nil, []byte("body"), 4, 0), &cmd)
	require.Equal(t, StatusError, res.Status)
	assert.Equal(t, binHeaderLen, res.N)
	assert.Equal(t, 5, res.Swallow)
	assert.False(t, res.Close)
	r, _ = decodeResp(t, res.Reply)
	assert.Equal(t, uint16(statusUnknownCommand), r.status)
	assert.Equal(t, uint8(0x55), r.op)

	// Extras that do not fit the opcode: invalid arguments, then memcached hangs up.
	for _, bad := range [][]byte{
		binReq(opGet, []byte("k"), be32(1), nil, 5, 0),
		binReq(opSet, []byte("k"), be32(1), []byte("v"), 5, 0),
		binReq(opIncrement, []byte("k"), be32(1), nil, 5, 0),
		binReq(opNoop, []byte("k"), nil, nil, 5, 0),
		binReq(opGet, nil, nil, nil, 5, 0),
		binReq(opGet, []byte(strings.Repeat("k", 251)), nil, nil, 5, 0),
	} {
		res = p.ParseBinary(bad, &cmd)
		require.Equal(t, StatusError, res.Status)
		assert.True(t, res.Close)
		r, _ = decodeResp(t, res.Reply)
		assert.Equal(t, uint16(statusInvalid), r.status)
		assert.Equal(t, uint32(5), r.opaque)
	}

	// A key and extras longer than the body.
	hdr := binReq(opGet, []byte("key"), nil, nil, 6, 0)
	binary.BigEndian.PutUint32(hdr[8:], 1)
	res = p.ParseBinary(hdr, &cmd)
	assert.True(t, res.Close)
	r, _ = decodeResp(t, res.Reply)
	assert.Equal(t, uint16(statusUnknownCommand), r.status)

	// Bad magic: closed without a reply.
	res = p.ParseBinary(append([]byte{0x42}, make([]byte, 23)...), &cmd)
	assert.True(t, res.Close)
	assert.Empty(t, res.Reply)
}

func TestParseBinaryDoesNotAllocate(t *testing.T) {
	in := [][]byte{
		binReq(opGetKQ, []byte("key"), nil, nil, 1, 0),
		binReq(opSet, []byte("key"), setExtras(1, 2), []byte("value"), 1, 0),
		binReq(opNoop, nil, nil, nil, 1, 0),
	}
	var p Parser
	var cmd Command
	for _, b := range in {
		p.ParseBinary(b, &cmd)
	}
	require.Zero(t, testing.AllocsPerRun(200, func() {
		for _, b := range in {
			p.ParseBinary(b, &cmd)
		}
	}))
}

func FuzzParseBinary(f *testing.F) {
	f.Add(binReq(opGet, []byte("k"), nil, nil, 1, 0))
	f.Add(binReq(opSet, []byte("k"), setExtras(1, 2), []byte("v"), 1, 0))
	f.Add(binReq(opIncrement, []byte("k"), incrExtras(1, 2, 3), nil, 1, 0))
	f.Add(binReq(opFlush, nil, be32(1), nil, 1, 0))
	f.Add(binReq(opStat, []byte("settings"), nil, nil, 1, 0))
	f.Add(append(binReq(opGetQ, []byte("a"), nil, nil, 1, 0), binReq(opNoop, nil, nil, nil, 2, 0)...))
	f.Fuzz(func(t *testing.T, in []byte) {
		// Some runs bound the values still arriving (MaxBuffered).
		p := Parser{MaxItemSize: 1 << 12, MaxBuffered: len(in) % 3 * 40}
		var cmd Command
		off := 0
		for steps := 0; off < len(in) && steps < 100; steps++ {
			res := p.ParseBinary(in[off:], &cmd)
			if res.N < 0 || res.N > len(in)-off {
				t.Fatalf("consumed %d of %d", res.N, len(in)-off)
			}
			switch res.Status {
			case StatusNeedMore:
				if res.Need != 0 && res.Need <= len(in)-off {
					t.Fatalf("need-more for %d bytes with %d here", res.Need, len(in)-off)
				}
				return
			case StatusOK:
				if res.N < binHeaderLen {
					t.Fatalf("ok after %d bytes", res.N)
				}
				if len(cmd.Data) > 1<<12 {
					t.Fatalf("value of %d bytes over the limit", len(cmd.Data))
				}
				for _, k := range cmd.Keys {
					if len(k) == 0 || len(k) > KeyMaxLength {
						t.Fatalf("bad key length %d", len(k))
					}
				}
			case StatusError:
				if len(res.Reply) > 0 {
					decodeResp(t, res.Reply)
				}
				if res.Close {
					return
				}
			}
			off += res.N + res.Swallow
		}
	})
}

// countingDriver records the size of every batch it is given.
type countingDriver struct {
	ndbclient.Driver
	mu    sync.Mutex
	sizes []int
}

func (d *countingDriver) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	d.mu.Lock()
	d.sizes = append(d.sizes, len(b.Ops))
	d.mu.Unlock()
	d.Driver.Submit(b, done)
}

// Stats reports one data node, so the dispatcher sends each request's batch
// as one round, in one flight, and the sizes seen here are the gateway's
// batches.
func (d *countingDriver) Stats() ndbclient.DriverStats {
	s := d.Driver.Stats()
	s.Nodes = 1
	return s
}

func (d *countingDriver) take() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.sizes
	d.sizes = nil
	return s
}

func TestBinaryQuietGetRunIsOneBatch(t *testing.T) {
	drv := &countingDriver{Driver: newEngine(t)}
	addr := startServer(t, "", drv, 64)
	conn := dialServer(t, addr, 10*time.Second)

	var req []byte
	for i, k := range []string{"a", "b", "c"} {
		req = append(req, binReq(opSetQ, []byte(k), setExtras(uint32(i), 0), []byte("v"+k), 0, 0)...)
	}
	req = append(req, binReq(opNoop, nil, nil, nil, 99, 0)...)
	_, err := conn.Write(req)
	require.NoError(t, err)
	r := readResp(t, conn)
	require.Equal(t, uint8(opNoop), r.op) // quiet sets said nothing
	drv.take()

	// GETKQ a, GETQ missing, GETKQ c, GETK b, then NOOP: one batch of four keys.
	req = binReq(opGetKQ, []byte("a"), nil, nil, 1, 0)
	req = append(req, binReq(opGetQ, []byte("missing"), nil, nil, 2, 0)...)
	req = append(req, binReq(opGetKQ, []byte("c"), nil, nil, 3, 0)...)
	req = append(req, binReq(opGetK, []byte("b"), nil, nil, 4, 0)...)
	req = append(req, binReq(opNoop, nil, nil, nil, 5, 0)...)
	_, err = conn.Write(req)
	require.NoError(t, err)
	var got []binResp
	for len(got) < 4 {
		got = append(got, readResp(t, conn))
	}
	assert.Equal(t, []int{4}, drv.take(), "batch sizes")
	assert.Equal(t, uint32(1), got[0].opaque)
	assert.Equal(t, "a", string(got[0].key))
	assert.Equal(t, "va", string(got[0].vb))
	assert.Equal(t, []byte{0, 0, 0, 0}, got[0].extras)
	assert.NotZero(t, got[0].cas)
	assert.Equal(t, uint32(3), got[1].opaque)
	assert.Equal(t, []byte{0, 0, 0, 2}, got[1].extras)
	assert.Equal(t, uint32(4), got[2].opaque)
	assert.Equal(t, "b", string(got[2].key))
	assert.Equal(t, uint8(opNoop), got[3].op)
	assert.Equal(t, uint32(5), got[3].opaque)

	// A binary incr with an initial value creates the key; the next adds.
	_, err = conn.Write(append(binReq(opIncrement, []byte("n"), incrExtras(5, 40, 0), nil, 6, 0),
		binReq(opIncrement, []byte("n"), incrExtras(5, 40, 0), nil, 7, 0)...))
	require.NoError(t, err)
	for _, want := range []uint64{40, 45} {
		r := readResp(t, conn)
		require.Equal(t, uint16(statusOK), r.status)
		assert.Equal(t, want, binary.BigEndian.Uint64(r.vb))
		assert.NotZero(t, r.cas)
	}
	// With 0xffffffff it does not create.
	_, err = conn.Write(binReq(opDecrement, []byte("nn"), incrExtras(1, 0, noCreate), nil, 8, 0))
	require.NoError(t, err)
	assert.Equal(t, uint16(statusKeyNotFound), readResp(t, conn).status)

	// Delete with a stale cas is refused; with the right one it deletes.
	_, err = conn.Write(binReq(opGet, []byte("a"), nil, nil, 9, 0))
	require.NoError(t, err)
	cas := readResp(t, conn).cas
	_, err = conn.Write(append(binReq(opDelete, []byte("a"), nil, nil, 10, cas+1),
		binReq(opDelete, []byte("a"), nil, nil, 11, cas)...))
	require.NoError(t, err)
	assert.Equal(t, uint16(statusKeyExists), readResp(t, conn).status)
	assert.Equal(t, uint16(statusOK), readResp(t, conn).status)
}

// Pipelined gets that are not quiet (what memtier and most clients send)
// also read as one batch, and each still answers in order, hit or miss.
func TestBinaryGetPipelineIsOneBatch(t *testing.T) {
	drv := &countingDriver{Driver: newEngine(t)}
	addr := startServer(t, "", drv, 64)
	conn := dialServer(t, addr, 10*time.Second)

	req := binReq(opSetQ, []byte("a"), setExtras(1, 0), []byte("va"), 0, 0)
	req = append(req, binReq(opSetQ, []byte("b"), setExtras(2, 0), []byte("vb"), 0, 0)...)
	req = append(req, binReq(opNoop, nil, nil, nil, 99, 0)...)
	_, err := conn.Write(req)
	require.NoError(t, err)
	require.Equal(t, uint8(opNoop), readResp(t, conn).op)
	drv.take()

	req = binReq(opGet, []byte("a"), nil, nil, 1, 0)
	req = append(req, binReq(opGetK, []byte("missing"), nil, nil, 2, 0)...)
	req = append(req, binReq(opGetKQ, []byte("b"), nil, nil, 3, 0)...)
	req = append(req, binReq(opGet, []byte("gone"), nil, nil, 4, 0)...)
	_, err = conn.Write(req)
	require.NoError(t, err)
	var got []binResp
	for range 4 {
		got = append(got, readResp(t, conn))
	}
	assert.Equal(t, []int{4}, drv.take(), "batch sizes")
	assert.Equal(t, []uint32{1, 2, 3, 4}, []uint32{got[0].opaque, got[1].opaque, got[2].opaque, got[3].opaque})
	assert.Equal(t, uint16(statusOK), got[0].status)
	assert.Equal(t, "va", string(got[0].vb))
	assert.Empty(t, got[0].key, "GET does not return the key")
	assert.Equal(t, uint16(statusKeyNotFound), got[1].status)
	assert.Equal(t, "missing", string(got[1].key), "GETK returns the key on a miss")
	assert.Equal(t, "vb", string(got[2].vb))
	assert.Equal(t, "b", string(got[2].key))
	assert.Equal(t, uint16(statusKeyNotFound), got[3].status)
	assert.Equal(t, uint8(opGet), got[3].op)
}

// failingDriver fails every batch whole, as a backend that is down does.
type failingDriver struct{ ndbclient.Driver }

func (d failingDriver) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	done(b, ndbclient.Errorf(ndbclient.CodeUnavailable, "backend down"))
}

// A run of gets whose batch fails whole answers every get in it, quiet or
// not, with the error and its own opaque: no client is left waiting.
func TestBinaryFailedGetRunAnswersEveryGet(t *testing.T) {
	addr := startServer(t, "", failingDriver{newEngine(t)}, 64)
	conn := dialServer(t, addr, 10*time.Second)
	req := binReq(opGet, []byte("a"), nil, nil, 1, 0)
	req = append(req, binReq(opGetKQ, []byte("b"), nil, nil, 2, 0)...)
	req = append(req, binReq(opGetK, []byte("c"), nil, nil, 3, 0)...)
	req = append(req, binReq(opNoop, nil, nil, nil, 4, 0)...)
	_, err := conn.Write(req)
	require.NoError(t, err)
	for i, want := range []uint8{opGet, opGetKQ, opGetK} {
		r := readResp(t, conn)
		assert.Equal(t, want, r.op, "reply %d", i)
		assert.Equal(t, uint32(i+1), r.opaque, "reply %d", i)
		assert.Equal(t, uint16(statusTempFailure), r.status, "reply %d", i)
	}
	r := readResp(t, conn)
	assert.Equal(t, uint8(opNoop), r.op)
	assert.Equal(t, uint32(4), r.opaque)
}

func readResp(t *testing.T, c net.Conn) binResp {
	t.Helper()
	h := make([]byte, binHeaderLen)
	_, err := readFull(c, h)
	require.NoError(t, err)
	body := make([]byte, binary.BigEndian.Uint32(h[8:]))
	_, err = readFull(c, body)
	require.NoError(t, err)
	r, _ := decodeResp(t, append(h, body...))
	return r
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestBinaryCasOnIncrAndAppend: a non-zero cas on INCR/DECR and APPEND/PREPEND
// is compared, as memcached does (EXISTS on a mismatch).
func TestBinaryCasOnIncrAndAppend(t *testing.T) {
	addr := startServer(t, "", newEngine(t), 64)
	conn := dialServer(t, addr, 10*time.Second)
	do := func(req []byte) binResp {
		_, err := conn.Write(req)
		require.NoError(t, err)
		return readResp(t, conn)
	}
	r := do(binReq(opIncrement, []byte("n"), incrExtras(1, 5, 0), nil, 1, 0))
	require.Equal(t, uint16(statusOK), r.status)
	cas := r.cas
	assert.Equal(t, uint16(statusKeyExists), do(binReq(opIncrement, []byte("n"), incrExtras(1, 0, 0), nil, 2, cas+100)).status)
	r = do(binReq(opIncrement, []byte("n"), incrExtras(1, 0, 0), nil, 3, cas))
	require.Equal(t, uint16(statusOK), r.status)
	assert.Equal(t, uint64(6), binary.BigEndian.Uint64(r.vb))

	r = do(binReq(opSet, []byte("s"), setExtras(0, 0), []byte("mid"), 4, 0))
	require.Equal(t, uint16(statusOK), r.status)
	assert.Equal(t, uint16(statusKeyExists), do(binReq(opAppend, []byte("s"), nil, []byte(">"), 5, r.cas+1)).status)
	assert.Equal(t, uint16(statusOK), do(binReq(opAppend, []byte("s"), nil, []byte(">"), 6, r.cas)).status)
	r = do(binReq(opGet, []byte("s"), nil, nil, 7, 0))
	assert.Equal(t, "mid>", string(r.vb))
}

// A refused binary command counts as a binary one (stats' ndbgate_binary_cmds,
// ndbgate_memcache_commands_total{dialect="binary"}), not as text.
func TestRefusedBinaryCommandCountsAsBinary(t *testing.T) {
	srv := NewServer(Config{Version: "test"}, newDemoService(t, newEngine(t)), discardLog)
	cs := srv.newConnState(&recordingTransport{}, shardmetrics.SharedShard, nil)
	text, bin := srv.m.stats.Value(int(dialectText)), srv.m.stats.Value(int(dialectBinary))
	unknown := binReq(0x50, nil, nil, nil, 1, 0) // no such opcode
	require.Equal(t, len(unknown), cs.serve(unknown))
	cs.flush()
	assert.Equal(t, bin+1, srv.m.stats.Value(int(dialectBinary)))
	assert.Equal(t, text, srv.m.stats.Value(int(dialectText)))
}
