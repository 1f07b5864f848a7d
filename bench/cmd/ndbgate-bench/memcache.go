package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// The memcache clients keep -pipeline requests on the wire: they write that
// many, then read that many replies (as memtier does), so each request's
// latency includes its place in the pipeline.

const ioTimeout = 10 * time.Second

type memcacheConn struct {
	nc       net.Conn
	r        *bufio.Reader
	w        *bufio.Writer
	pipeline int
	// queued requests of the pipeline not yet sent
	pending int
}

func dialMemcache(cfg *config) (*memcacheConn, error) {
	nc, err := net.DialTimeout("tcp", cfg.addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &memcacheConn{nc: nc, r: bufio.NewReaderSize(nc, 64<<10), w: bufio.NewWriterSize(nc, 64<<10), pipeline: cfg.pipeline}, nil
}

func (m *memcacheConn) close() error { return m.nc.Close() }

// textClient speaks memcached's text protocol.
type textClient struct {
	*memcacheConn
	line []byte
}

func dialMemcacheText(cfg *config) (client, error) {
	m, err := dialMemcache(cfg)
	if err != nil {
		return nil, err
	}
	return &textClient{memcacheConn: m}, nil
}

// roundTrip sends pipeline copies of the request write produces and reads as
// many replies with read; the result is the last reply's.
func (m *memcacheConn) roundTrip(write func(w *bufio.Writer), read func(r *bufio.Reader) (int, error)) (int, error) {
	_ = m.nc.SetDeadline(time.Now().Add(ioTimeout))
	for i := 0; i < m.pipeline; i++ {
		write(m.w)
	}
	if err := m.w.Flush(); err != nil {
		return 0, err
	}
	hits := 0
	for i := 0; i < m.pipeline; i++ {
		h, err := read(m.r)
		if err != nil {
			return 0, err
		}
		hits = h
	}
	return hits, nil
}

func (c *textClient) get(_ context.Context, keys []string) (int, error) {
	return c.roundTrip(func(w *bufio.Writer) {
		w.WriteString("get")
		for _, k := range keys {
			w.WriteByte(' ')
			w.WriteString(k)
		}
		w.WriteString("\r\n")
	}, c.readValues)
}

// readValues reads VALUE blocks up to END and counts them.
func (c *textClient) readValues(r *bufio.Reader) (int, error) {
	hits := 0
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		switch {
		case bytes.HasPrefix(line, []byte("END")):
			return hits, nil
		case bytes.HasPrefix(line, []byte("VALUE ")):
			f := bytes.Fields(line)
			if len(f) < 4 {
				return 0, fmt.Errorf("bad VALUE line %q", line)
			}
			n, err := strconv.Atoi(string(f[3]))
			if err != nil {
				return 0, fmt.Errorf("bad VALUE line %q", line)
			}
			if _, err := r.Discard(n + 2); err != nil {
				return 0, err
			}
			hits++
		default:
			return 0, fmt.Errorf("unexpected reply %q", bytes.TrimSpace(line))
		}
	}
}

func (c *textClient) set(_ context.Context, key string, value []byte) error {
	_, err := c.roundTrip(func(w *bufio.Writer) {
		w.WriteString("set ")
		w.WriteString(key)
		w.WriteString(" 0 0 ")
		w.WriteString(strconv.Itoa(len(value)))
		w.WriteString("\r\n")
		w.Write(value)
		w.WriteString("\r\n")
	}, func(r *bufio.Reader) (int, error) {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if !bytes.Equal(line, []byte("STORED\r\n")) {
			return 0, fmt.Errorf("set: %q", bytes.TrimSpace(line))
		}
		return 0, nil
	})
	return err
}

// binaryClient speaks memcached's binary protocol: a multi-key read is a run
// of GETKQ ended by NOOP, as libmemcached sends it.
type binaryClient struct {
	*memcacheConn
	hdr [24]byte
}

func dialMemcacheBinary(cfg *config) (client, error) {
	m, err := dialMemcache(cfg)
	if err != nil {
		return nil, err
	}
	return &binaryClient{memcacheConn: m}, nil
}

const (
	opGet   = 0x00
	opSet   = 0x01
	opNoop  = 0x0a
	opGetKQ = 0x0d
)

func writeBinReq(w *bufio.Writer, op byte, key string, extras, value []byte) {
	var h [24]byte
	h[0] = 0x80
	h[1] = op
	binary.BigEndian.PutUint16(h[2:], uint16(len(key)))
	h[4] = byte(len(extras))
	binary.BigEndian.PutUint32(h[8:], uint32(len(extras)+len(key)+len(value)))
	w.Write(h[:])
	w.Write(extras)
	w.WriteString(key)
	w.Write(value)
}

// readBinResp reads one response and returns its opcode and status.
func (c *binaryClient) readBinResp(r *bufio.Reader) (op byte, status uint16, err error) {
	if _, err = io.ReadFull(r, c.hdr[:]); err != nil {
		return 0, 0, err
	}
	if c.hdr[0] != 0x81 {
		return 0, 0, fmt.Errorf("bad response magic %#x", c.hdr[0])
	}
	body := binary.BigEndian.Uint32(c.hdr[8:])
	if _, err = r.Discard(int(body)); err != nil {
		return 0, 0, err
	}
	return c.hdr[1], binary.BigEndian.Uint16(c.hdr[6:]), nil
}

func (c *binaryClient) get(_ context.Context, keys []string) (int, error) {
	if len(keys) == 1 {
		return c.roundTrip(func(w *bufio.Writer) { writeBinReq(w, opGet, keys[0], nil, nil) }, func(r *bufio.Reader) (int, error) {
			_, status, err := c.readBinResp(r)
			switch {
			case err != nil:
				return 0, err
			case status == 0:
				return 1, nil
			case status == 1:
				return 0, nil
			}
			return 0, fmt.Errorf("get: status %#x", status)
		})
	}
	return c.roundTrip(func(w *bufio.Writer) {
		for _, k := range keys {
			writeBinReq(w, opGetKQ, k, nil, nil)
		}
		writeBinReq(w, opNoop, "", nil, nil)
	}, func(r *bufio.Reader) (int, error) {
		hits := 0
		for {
			op, status, err := c.readBinResp(r)
			if err != nil {
				return 0, err
			}
			if op == opNoop {
				return hits, nil
			}
			if status != 0 {
				return 0, fmt.Errorf("getkq: status %#x", status)
			}
			hits++
		}
	})
}

func (c *binaryClient) set(_ context.Context, key string, value []byte) error {
	extras := make([]byte, 8) // flags, exptime
	_, err := c.roundTrip(func(w *bufio.Writer) { writeBinReq(w, opSet, key, extras, value) }, func(r *bufio.Reader) (int, error) {
		_, status, err := c.readBinResp(r)
		if err == nil && status != 0 {
			err = fmt.Errorf("set: status %#x", status)
		}
		return 0, err
	})
	return err
}
