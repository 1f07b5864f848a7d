package memcache

import (
	"fmt"
	"testing"

	"github.com/ndbgate/ndbgate/internal/shardmetrics"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
)

// discardTransport stands in for a transport: replies are counted and
// dropped.
type discardTransport struct {
	n   int
	out []byte
}

func (d *discardTransport) Output() []byte { return d.out[:0] }
func (d *discardTransport) Send(b []byte)  { d.n += len(b); d.out = b[:0] }
func (d *discardTransport) Wake()          {}
func (d *discardTransport) Backlog() int   { return 0 }
func (d *discardTransport) WakeWhenSent()  {}

// benchConn is one connection of a server on the embedded engine, with the
// network taken away: what is left is the per-command CPU the gateway spends.
func benchConn(b *testing.B, keys int) (*connState, *discardTransport) {
	b.Helper()
	e := embedded.New(embedded.Config{})
	b.Cleanup(func() { _ = e.Close() })
	srv := NewServer(Config{Version: "bench"}, newDemoService(b, e), discardLog)
	tr := &discardTransport{}
	cs := srv.newConnState(tr, shardmetrics.SharedShard, nil)
	val := make([]byte, 32)
	for i := 0; i < keys; i++ {
		cmd := fmt.Appendf(nil, "set memtier-%d 0 0 32 noreply\r\n%s\r\n", i, val)
		if n := cs.serve(cmd); n != len(cmd) {
			b.Fatalf("preload consumed %d of %d", n, len(cmd))
		}
		cs.flush()
	}
	return cs, tr
}

// serveEach runs the commands round robin, one per iteration, each served and
// its reply flushed as the event loop would.
func serveEach(b *testing.B, cs *connState, tr *discardTransport, cmds [][]byte) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := cmds[i%len(cmds)]
		if n := cs.serve(cmd); n != len(cmd) {
			b.Fatalf("consumed %d of %d", n, len(cmd))
		}
		cs.flush()
	}
	if tr.n == 0 {
		b.Fatal("no replies")
	}
}

// BenchmarkTextGetHit is one "get" of a stored 32-byte value, served end to
// end except for the socket: parse, gateway, engine, encode, metrics.
func BenchmarkTextGetHit(b *testing.B) {
	const keys = 100000
	cs, tr := benchConn(b, keys)
	cmds := make([][]byte, 4096)
	for i := range cmds {
		cmds[i] = fmt.Appendf(nil, "get memtier-%d\r\n", (i*7919)%keys)
	}
	serveEach(b, cs, tr, cmds)
}

// BenchmarkTextSet is one "set" of a 32-byte value over an existing key.
func BenchmarkTextSet(b *testing.B) {
	const keys = 100000
	cs, tr := benchConn(b, keys)
	val := make([]byte, 32)
	cmds := make([][]byte, 4096)
	for i := range cmds {
		cmds[i] = fmt.Appendf(nil, "set memtier-%d 0 0 32\r\n%s\r\n", (i*7919)%keys, val)
	}
	serveEach(b, cs, tr, cmds)
}

// BenchmarkBinaryGetHit is BenchmarkTextGetHit over the binary protocol: one
// GET (not quiet) of a stored 32-byte value.
func BenchmarkBinaryGetHit(b *testing.B) {
	const keys = 100000
	cs, tr := benchConn(b, keys)
	cs.proto = protoBinary
	cmds := make([][]byte, 4096)
	for i := range cmds {
		key := fmt.Appendf(nil, "memtier-%d", (i*7919)%keys)
		cmds[i] = append(appendBinHeader(nil, opGet, len(key), 0, 0, len(key), uint32(i), 0), key...)
		cmds[i][0] = binReqMagic
	}
	serveEach(b, cs, tr, cmds)
}

// BenchmarkTextGetHitParallel runs BenchmarkTextGetHit's command on one
// connection per P, as the event loops do: what shared counters cost when
// every core updates them.
func BenchmarkTextGetHitParallel(b *testing.B) {
	const keys = 100000
	cs0, _ := benchConn(b, keys)
	srv := cs0.srv
	cmds := make([][]byte, 4096)
	for i := range cmds {
		cmds[i] = fmt.Appendf(nil, "get memtier-%d\r\n", (i*7919)%keys)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		cs := srv.newConnState(&discardTransport{}, shardmetrics.SharedShard, nil)
		for i := 0; pb.Next(); i++ {
			cmd := cmds[i&4095]
			if n := cs.serve(cmd); n != len(cmd) {
				b.Errorf("consumed %d of %d", n, len(cmd))
				return
			}
			cs.flush()
		}
	})
}

// BenchmarkTextGetHitLoop serves BenchmarkTextGetHit's command round robin
// over 25 connections of one event loop, as memtier's 2x25 load puts them:
// what a connection's state costs when its cache lines have gone cold.
func BenchmarkTextGetHitLoop(b *testing.B) {
	const keys, conns = 100000, 25
	cs0, tr := benchConn(b, keys)
	css := []*connState{cs0}
	for len(css) < conns {
		css = append(css, cs0.srv.newConnState(tr, shardmetrics.SharedShard, cs0.scratch))
	}
	cmds := make([][]byte, 4096)
	for i := range cmds {
		cmds[i] = fmt.Appendf(nil, "get memtier-%d\r\n", (i*7919)%keys)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cs, cmd := css[i%conns], cmds[i&4095]
		if n := cs.serve(cmd); n != len(cmd) {
			b.Fatalf("consumed %d of %d", n, len(cmd))
		}
		cs.flush()
	}
}

// binarySet is memtier's binary SET: flags and expiry in the extras.
func binarySet(key, val []byte, opaque uint32) []byte {
	cmd := appendBinHeader(nil, opSet, len(key), 8, 0, 8+len(key)+len(val), opaque, 0)
	cmd[0] = binReqMagic
	cmd = append(cmd, 0, 0, 0, 0, 0, 0, 0, 0)
	return append(append(cmd, key...), val...)
}

// BenchmarkBinaryPipeline16 serves memtier's binary load at pipeline 16,
// SETs and GETs of 32-byte values over 100k keys, in each mix: each
// iteration is one read of 16 commands over 25 connections of a loop.
// ns/op is per command.
func BenchmarkBinaryPipeline16(b *testing.B) {
	const keys, conns, depth = 100000, 25, 16
	for _, mix := range []struct {
		name string
		sets int // of every 11
	}{{"sets", 11}, {"1:1", 5}, {"1:10", 1}, {"gets", 0}} {
		b.Run(mix.name, func(b *testing.B) {
			cs0, tr := benchConn(b, keys)
			css := []*connState{cs0}
			for len(css) < conns {
				css = append(css, cs0.srv.newConnState(tr, shardmetrics.SharedShard, cs0.scratch))
			}
			for _, cs := range css {
				cs.proto = protoBinary
			}
			val := make([]byte, 32)
			bufs := make([][]byte, 512)
			rng := uint64(1)
			for i := range bufs {
				for j := 0; j < depth; j++ {
					rng = rng*6364136223846793005 + 1442695040888963407
					key := fmt.Appendf(nil, "memtier-%d", (rng>>33)%keys)
					if int(rng>>20)%11 < mix.sets {
						bufs[i] = append(bufs[i], binarySet(key, val, uint32(j))...)
						continue
					}
					get := appendBinHeader(nil, opGet, len(key), 0, 0, len(key), uint32(j), 0)
					get[0] = binReqMagic
					bufs[i] = append(append(bufs[i], get...), key...)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += depth {
				cs, buf := css[(i/depth)%conns], bufs[(i/depth)%len(bufs)]
				if n := cs.serve(buf); n != len(buf) {
					b.Fatalf("consumed %d of %d", n, len(buf))
				}
				cs.flush()
			}
		})
	}
}
