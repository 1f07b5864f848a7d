package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/ndbgate/ndbgate/protocols/grpc/kvpb"
	"github.com/ndbgate/ndbgate/protocols/grpc/rdrspb"
)

// HTTP and gRPC multiplex requests over a pool: -conns connections carry
// -conns x -pipeline concurrent requests.

var (
	httpOnce      sync.Once
	httpTransport *http.Transport
)

func sharedHTTP(cfg *config) *http.Client {
	httpOnce.Do(func() {
		httpTransport = &http.Transport{MaxConnsPerHost: cfg.conns, MaxIdleConnsPerHost: cfg.conns, IdleConnTimeout: time.Minute}
	})
	return &http.Client{Transport: httpTransport, Timeout: ioTimeout}
}

type restClient struct {
	cfg  *config
	hc   *http.Client
	mode string // pkread, batch, kv
	base string
	body bytes.Buffer
}

func dialREST(mode string) dialer {
	return func(cfg *config) (client, error) {
		c := &restClient{cfg: cfg, hc: sharedHTTP(cfg), mode: mode, base: "http://" + cfg.addr}
		// Prove the server answers before the run starts.
		resp, err := c.hc.Get(c.base + "/openapi.yaml")
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return c, nil
	}
}

func (c *restClient) close() error { return nil }

func (c *restClient) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if c.cfg.apiKey != "" {
		req.Header.Set("X-API-KEY", c.cfg.apiKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (c *restClient) pkBody(key string) {
	c.body.WriteString(`{"filters":[{"column":`)
	c.body.WriteString(strconv.Quote(c.cfg.keyColumn))
	c.body.WriteString(`,"value":`)
	c.body.WriteString(strconv.Quote(key))
	c.body.WriteString(`}],"readColumns":[{"column":`)
	c.body.WriteString(strconv.Quote(c.cfg.valueColumn))
	c.body.WriteString(`}]}`)
}

func (c *restClient) get(ctx context.Context, keys []string) (int, error) {
	switch c.mode {
	case "pkread": // one request per key, one after another
		hits := 0
		for _, k := range keys {
			c.body.Reset()
			c.pkBody(k)
			status, b, err := c.do(ctx, http.MethodPost, "/0.1.0/"+c.cfg.db+"/"+c.cfg.table+"/pk-read", c.body.Bytes())
			switch {
			case err != nil:
				return 0, err
			case status == http.StatusOK:
				hits++
			case status != http.StatusNotFound:
				return 0, fmt.Errorf("pk-read: %d %s", status, b)
			}
		}
		return hits, nil
	case "batch":
		c.body.Reset()
		c.body.WriteString(`{"operations":[`)
		rel := strconv.Quote(c.cfg.db + "/" + c.cfg.table + "/pk-read")
		for i, k := range keys {
			if i > 0 {
				c.body.WriteByte(',')
			}
			c.body.WriteString(`{"method":"POST","relative-url":`)
			c.body.WriteString(rel)
			c.body.WriteString(`,"body":`)
			c.pkBody(k)
			c.body.WriteByte('}')
		}
		c.body.WriteString(`]}`)
		status, b, err := c.do(ctx, http.MethodPost, "/0.1.0/batch", c.body.Bytes())
		if err != nil {
			return 0, err
		}
		if status != http.StatusOK {
			return 0, fmt.Errorf("batch: %d %s", status, b)
		}
		return bytes.Count(b, []byte(`{"code":200`)), nil
	}
	if len(keys) == 1 {
		status, b, err := c.do(ctx, http.MethodGet, "/v1/kv/"+c.cfg.container+"/"+url.PathEscape(keys[0]), nil)
		switch {
		case err != nil:
			return 0, err
		case status == http.StatusOK:
			return 1, nil
		case status == http.StatusNotFound:
			return 0, nil
		}
		return 0, fmt.Errorf("kv get: %d %s", status, b)
	}
	c.body.Reset()
	c.body.WriteString(`{"keys":[`)
	for i, k := range keys {
		if i > 0 {
			c.body.WriteByte(',')
		}
		c.body.WriteString(strconv.Quote(k))
	}
	c.body.WriteString(`]}`)
	status, b, err := c.do(ctx, http.MethodPost, "/v1/kv/"+c.cfg.container+"/_mget", c.body.Bytes())
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("kv _mget: %d %s", status, b)
	}
	return bytes.Count(b, []byte(`"found":true`)), nil
}

// set writes through the KV API (the same rows the row API reads).
func (c *restClient) set(ctx context.Context, key string, value []byte) error {
	status, b, err := c.do(ctx, http.MethodPut, "/v1/kv/"+c.cfg.container+"/"+url.PathEscape(key), value)
	if err == nil && status != http.StatusNoContent {
		err = fmt.Errorf("kv put: %d %s", status, b)
	}
	return err
}

var (
	grpcMu    sync.Mutex
	grpcConns []*grpc.ClientConn
	grpcNext  int
)

// sharedGRPC hands out -conns connections round-robin.
func sharedGRPC(cfg *config) (*grpc.ClientConn, error) {
	grpcMu.Lock()
	defer grpcMu.Unlock()
	if len(grpcConns) < cfg.conns {
		cc, err := grpc.NewClient(cfg.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		grpcConns = append(grpcConns, cc)
		return cc, nil
	}
	cc := grpcConns[grpcNext%len(grpcConns)]
	grpcNext++
	return cc, nil
}

type grpcClient struct {
	cfg   *config
	mode  string // kv, rondb
	kv    kvpb.KVClient
	rondb rdrspb.RonDBRESTClient
	keys  [][]byte
}

func dialGRPC(mode string) dialer {
	return func(cfg *config) (client, error) {
		cc, err := sharedGRPC(cfg)
		if err != nil {
			return nil, err
		}
		return &grpcClient{cfg: cfg, mode: mode, kv: kvpb.NewKVClient(cc), rondb: rdrspb.NewRonDBRESTClient(cc)}, nil
	}
}

func (c *grpcClient) close() error { return nil } // connections are shared; the process exits

func (c *grpcClient) ctx(ctx context.Context) context.Context {
	if c.cfg.apiKey != "" {
		return metadata.AppendToOutgoingContext(ctx, "x-api-key", c.cfg.apiKey)
	}
	return ctx
}

func (c *grpcClient) pk(key string) *rdrspb.PKReadRequestProto {
	return &rdrspb.PKReadRequestProto{DB: proto.String(c.cfg.db), Table: proto.String(c.cfg.table),
		Filters:     []*rdrspb.FilterProto{{Column: proto.String(c.cfg.keyColumn), Value: proto.String(strconv.Quote(key))}},
		ReadColumns: []*rdrspb.ReadColumnProto{{Column: proto.String(c.cfg.valueColumn)}}}
}

func (c *grpcClient) get(ctx context.Context, keys []string) (int, error) {
	ctx = c.ctx(ctx)
	if c.mode == "rondb" {
		if len(keys) == 1 {
			_, err := c.rondb.PKRead(ctx, c.pk(keys[0]))
			if err != nil {
				if isNotFound(err) {
					return 0, nil
				}
				return 0, err
			}
			return 1, nil
		}
		req := &rdrspb.BatchRequestProto{}
		for _, k := range keys {
			req.Operations = append(req.Operations, c.pk(k))
		}
		resp, err := c.rondb.Batch(ctx, req)
		if err != nil {
			return 0, err
		}
		hits := 0
		for _, r := range resp.Responses {
			if r.GetCode() == 200 {
				hits++
			}
		}
		return hits, nil
	}
	if len(keys) == 1 {
		_, err := c.kv.Get(ctx, &kvpb.GetRequest{Container: c.cfg.container, Key: []byte(keys[0])})
		if err != nil {
			if isNotFound(err) {
				return 0, nil
			}
			return 0, err
		}
		return 1, nil
	}
	c.keys = c.keys[:0]
	for _, k := range keys {
		c.keys = append(c.keys, []byte(k))
	}
	resp, err := c.kv.MultiGet(ctx, &kvpb.MultiGetRequest{Container: c.cfg.container, Keys: c.keys})
	if err != nil {
		return 0, err
	}
	hits := 0
	for _, it := range resp.Items {
		if it.Found {
			hits++
		}
	}
	return hits, nil
}

func (c *grpcClient) set(ctx context.Context, key string, value []byte) error {
	_, err := c.kv.Set(c.ctx(ctx), &kvpb.SetRequest{Container: c.cfg.container, Key: []byte(key), Value: value})
	return err
}
