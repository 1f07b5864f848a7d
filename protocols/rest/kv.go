package rest

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/gateway/rowapi"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// The KV API reads and writes memcache items: the same rows the memcache port
// sees (a container's key prefix is not part of the key here).
//
//	GET    /v1/kv/{container}/{key}   200 raw value, 404
//	PUT    /v1/kv/{container}/{key}   204; If-Match: "<cas>" compare-and-set,
//	                                  If-None-Match: * add only (412 when not met)
//	DELETE /v1/kv/{container}/{key}   204, 404
//	POST   /v1/kv/{container}/_mget   {"keys":[...]} -> {"items":[...]}
//
// Headers: ETag is the item's cas (quoted); X-Ndbgate-Flags its 32-bit flags;
// X-Ndbgate-Ttl on PUT is memcached's exptime (seconds, or an absolute unix
// time past 30 days, 0 never) and on GET the seconds left (-1 never).
const (
	headerFlags = "X-Ndbgate-Flags"
	headerTTL   = "X-Ndbgate-Ttl"
)

func (h *Handler) routeKV() {
	h.reqs = gateway.NewKVRequests(h.o.KV)
	get, put, del := newEndpoint("kv_get", h.oneKey(h.kvGet)), newEndpoint("kv_put", h.oneKey(h.kvPut)), newEndpoint("kv_delete", h.oneKey(h.kvDelete))
	h.routes.kvItem = newResource(get, put, nil, del)
	// POST /v1/kv/{container}/_mget; "_mget" is a key to the other methods.
	h.routes.kvMget = newResource(get, put, newEndpoint("kv_mget", h.kvMget), del)
}

// kvRequest authenticates, finds the container's route and validates the key;
// it returns a reset Request pinned to the route.
func (h *Handler) kvRequest(r *http.Request, container, key string) (*gateway.Request, error) {
	who, err := h.principal(r)
	if err != nil {
		return nil, err
	}
	if err := who.Allow(container); err != nil {
		return nil, err
	}
	rt, ok := h.o.KV.RouteOf(container)
	if !ok {
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "container %q does not exist", container)
	}
	if r.Method != http.MethodPost {
		if err := checkKey(key); err != nil {
			return nil, err
		}
	}
	return h.reqs.Get(rt), nil
}

// checkKey applies memcached's key rules, so every key written here can be
// read over the memcache port.
func checkKey(key string) error { return gateway.ValidKey([]byte(key)) }

func (h *Handler) done(req *gateway.Request) { h.reqs.Done(req) }

// oneKey serves a request on one key (GET, PUT, DELETE) with f, given the
// gateway request kvRequest made for it.
func (h *Handler) oneKey(f func(w http.ResponseWriter, r *http.Request, req *gateway.Request, key string)) routeFunc {
	return func(w http.ResponseWriter, r *http.Request, v pathVars) {
		req, err := h.kvRequest(r, v.container, v.key)
		if err != nil {
			h.fail(w, err)
			return
		}
		defer h.done(req)
		f(w, r, req, v.key)
	}
}

func etag(cas uint64) string { return `"` + strconv.FormatUint(cas, 10) + `"` }

func (h *Handler) kvGet(w http.ResponseWriter, r *http.Request, req *gateway.Request, key string) {
	class, err := h.o.KV.RunKey(req, gateway.VerbGet, []byte(key))
	if err == nil {
		class, err = req.ItemResult(0)
	}
	if err != nil {
		h.kvFail(w, class, err)
		return
	}
	it := &req.Items[0]
	hd := w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("ETag", etag(it.Cas))
	hd.Set(headerFlags, strconv.FormatUint(uint64(it.Flags), 10))
	hd.Set(headerTTL, ttlLeft(it.Expire))
	hd.Set("Content-Length", strconv.Itoa(len(it.Value)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(it.Value)
}

func ttlLeft(expire uint32) string {
	if expire == 0 {
		return "-1"
	}
	return strconv.FormatInt(max(int64(expire)-time.Now().Unix(), 0), 10)
}

func (h *Handler) kvPut(w http.ResponseWriter, r *http.Request, req *gateway.Request, key string) {
	req.Verb = gateway.VerbSet
	if v := r.Header.Get(headerFlags); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			h.fail(w, badf("%s: %q is not a 32-bit unsigned number", headerFlags, v))
			return
		}
		req.Flags = uint32(n)
	}
	if v := r.Header.Get(headerTTL); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			h.fail(w, badf("%s: %q is not a number of seconds", headerTTL, v))
			return
		}
		req.Exptime = n
	}
	ifMatch, ifNone := r.Header.Get("If-Match"), r.Header.Get("If-None-Match")
	switch {
	case ifMatch != "" && ifNone != "":
		h.fail(w, badf("give If-Match (compare-and-set) or If-None-Match: * (add), not both"))
		return
	case ifMatch != "":
		cas, err := strconv.ParseUint(strings.Trim(strings.TrimPrefix(ifMatch, "W/"), `"`), 10, 64)
		if err != nil || cas == 0 {
			h.fail(w, badf("If-Match: %q is not an ETag of this API (a quoted cas number)", ifMatch))
			return
		}
		req.Verb, req.Cas = gateway.VerbCas, cas
	case ifNone == "*":
		req.Verb = gateway.VerbAdd
	case ifNone != "":
		h.fail(w, badf("If-None-Match: only * (store only if absent) is supported"))
		return
	}
	buf := h.getBuf()
	defer h.putBuf(buf)
	limit := h.o.KV.ItemSizeMax()
	if r.ContentLength > int64(limit) {
		h.fail(w, &http.MaxBytesError{Limit: int64(limit)})
		return
	}
	body, err := readBody(w, r, (*buf)[:0], int64(limit))
	*buf = body
	if err != nil {
		h.fail(w, err)
		return
	}
	req.AddKey([]byte(key))
	req.SetValue(body)
	h.o.KV.Run(req)
	if class, err := req.Result(); err != nil {
		h.kvFail(w, class, err)
		return
	}
	w.Header().Set("ETag", etag(req.NewCas))
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) kvDelete(w http.ResponseWriter, r *http.Request, req *gateway.Request, key string) {
	if class, err := h.o.KV.RunKey(req, gateway.VerbDelete, []byte(key)); err != nil {
		h.kvFail(w, class, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// kvStatus is HTTP's answer to each gateway class that is not an error of
// its own: a failed add or compare-and-set is a PUT whose If-None-Match: *
// or If-Match was not met, which HTTP answers 412.
var kvStatus = [...]struct {
	status int
	code   string
}{
	gateway.ClassNotFound: {http.StatusNotFound, "NotFound"},
	gateway.ClassExists:   {http.StatusPreconditionFailed, "ConditionFailed"},
	gateway.ClassChanged:  {http.StatusPreconditionFailed, "ConditionFailed"},
}

// kvFail answers a KV request the gateway did not do (Request.Result):
// by its class, or for ClassError as every error (statusOf).
func (h *Handler) kvFail(w http.ResponseWriter, class gateway.Class, err error) {
	if int(class) < len(kvStatus) && kvStatus[class].status != 0 {
		h.failAs(w, kvStatus[class].status, kvStatus[class].code, err)
		return
	}
	h.fail(w, err)
}

type mgetJSON struct {
	Keys []string `json:"keys"`
}

// An _mget's keys are read in pieces (gateway.Service.MultiGetPiece), and
// its body is sent as it is made, in parts of streamAt bytes: what one
// request holds stays bounded however many large values it asks for.
const streamAt = 256 << 10

// kvMget serves POST /v1/kv/{container}/_mget: one gateway request, so one
// backend batch, per piece of keys. A piece that fails after the body has
// begun gives each of its keys the error.
func (h *Handler) kvMget(w http.ResponseWriter, r *http.Request, v pathVars) {
	req, err := h.kvRequest(r, v.container, "")
	if err != nil {
		h.fail(w, err)
		return
	}
	defer h.done(req)
	buf := h.getBuf()
	defer h.putBuf(buf)
	body, err := readBody(w, r, (*buf)[:0], h.o.MaxBody)
	*buf = body
	if err != nil {
		h.fail(w, err)
		return
	}
	var in mgetJSON
	if err := decodeStrict(body, &in, "_mget body"); err != nil {
		h.fail(w, err)
		return
	}
	if len(in.Keys) == 0 {
		h.fail(w, badf(`_mget: "keys" must list at least one key`))
		return
	}
	if len(in.Keys) > h.o.MaxMultiGet {
		h.fail(w, badf("_mget: %d keys is more than the limit of %d", len(in.Keys), h.o.MaxMultiGet))
		return
	}
	for i, k := range in.Keys {
		if err := checkKey(k); err != nil {
			h.fail(w, badf("keys[%d]: %v", i, err))
			return
		}
	}
	started, failed := false, false
	out := append(body[len(body):], `{"items":[`...)
	_ = h.o.KV.GetInPieces(req, len(in.Keys), func(i int) []byte { return []byte(in.Keys[i]) }, func(start, end int) error {
		keys := in.Keys[start:end]
		items := req.Items
		if class, err := req.Result(); err != nil {
			if !started {
				h.kvFail(w, class, err)
				failed = true
				return err
			}
			items = make([]gateway.Item, len(keys))
			for i, k := range keys {
				items[i] = gateway.Item{Key: []byte(k), Err: err}
			}
		}
		out = appendItems(out, items, start > 0)
		if len(out) >= streamAt && end < len(in.Keys) {
			if !started {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				started = true
			}
			_, _ = w.Write(out)
			out = out[:0]
		}
		return nil
	})
	if failed {
		return
	}
	out = append(out, "]}"...)
	if started {
		_, _ = w.Write(out)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// appendItems appends the JSON of a get's items, after others if more.
func appendItems(out []byte, items []gateway.Item, more bool) []byte {
	for i := range items {
		it := &items[i]
		if i > 0 || more {
			out = append(out, ',')
		}
		out = append(out, `{"key":`...)
		out = rowapi.AppendString(out, it.Key)
		switch {
		case it.Err != nil:
			_, code := statusOf(it.Err)
			out = append(out, `,"found":false,`...)
			out = appendErrorMember(out, code, it.Err)
		case !it.Hit:
			out = append(out, `,"found":false`...)
		default:
			out = append(out, `,"found":true,"value":`...)
			if utf8.Valid(it.Value) {
				out = rowapi.AppendString(out, it.Value)
				out = append(out, `,"encoding":"utf8"`...)
			} else {
				out = append(out, '"')
				out = base64.StdEncoding.AppendEncode(out, it.Value)
				out = append(out, `","encoding":"base64"`...)
			}
			out = append(out, `,"flags":`...)
			out = strconv.AppendUint(out, uint64(it.Flags), 10)
			out = append(out, `,"cas":"`...)
			out = strconv.AppendUint(out, it.Cas, 10)
			out = append(out, `","ttl":`...)
			out = append(out, ttlLeft(it.Expire)...)
		}
		out = append(out, '}')
	}
	return out
}
