package rest

import (
	"bytes"
	"sync"
	"unicode/utf8"

	"github.com/ndbgate/ndbgate/gateway/rowapi"
)

// A fast path for the common request bodies: a hand-written scanner that
// understands exactly the well-formed pk-* and batch shapes, with names free
// of escapes, and gives up (ok = false) on anything else, which then goes
// through encoding/json (decode.go) for the same result or a worded error.
// FuzzDecodeRequest checks that whenever the fast path succeeds, it agrees
// with encoding/json. Values stay raw JSON spans of the body.

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// eat consumes c after whitespace.
func (s *scanner) eat(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// key reads a string with no escapes and valid UTF-8 (object keys,
// identifiers); the bytes point into the body.
func (s *scanner) key() ([]byte, bool) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		c := s.b[j]
		switch {
		case c == '"':
			if !utf8.Valid(s.b[start:j]) {
				return nil, false
			}
			s.i = j + 1
			return s.b[start:j], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// name reads an identifier as a string, interned: column, database and table
// names repeat from request to request.
func (s *scanner) name() (string, bool) {
	b, ok := s.key()
	if !ok {
		return "", false
	}
	return names.intern(b), true
}

// internTable maps identifiers to one string each. It stops growing at
// maxInterned entries, so hostile input cannot make it grow without bound.
type internTable struct {
	mu sync.RWMutex
	m  map[string]string
}

const maxInterned = 4096

var names = internTable{m: map[string]string{}}

func (t *internTable) intern(b []byte) string {
	t.mu.RLock()
	s, ok := t.m[string(b)]
	t.mu.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	t.mu.Lock()
	if len(t.m) < maxInterned {
		t.m[s] = s
	}
	t.mu.Unlock()
	return s
}

// value skips one scalar JSON value and returns its span. Objects and arrays
// are left to encoding/json.
func (s *scanner) value() ([]byte, bool) {
	s.ws()
	if s.i >= len(s.b) {
		return nil, false
	}
	start := s.i
	switch c := s.b[s.i]; {
	case c == '"':
		j := s.i + 1
		for ; j < len(s.b); j++ {
			c := s.b[j]
			if c == '"' {
				break
			}
			if c < 0x20 {
				return nil, false
			}
			if c == '\\' {
				j++
				if j >= len(s.b) {
					return nil, false
				}
				switch s.b[j] {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				case 'u':
					if j+4 >= len(s.b) || !isHex4(s.b[j+1:j+5]) {
						return nil, false
					}
					j += 4
				default:
					return nil, false
				}
			}
		}
		if j >= len(s.b) {
			return nil, false
		}
		s.i = j + 1
	case c == '-' || c >= '0' && c <= '9':
		j := s.i
		for j < len(s.b) && (s.b[j] == '-' || s.b[j] == '+' || s.b[j] == '.' || s.b[j] == 'e' || s.b[j] == 'E' || s.b[j] >= '0' && s.b[j] <= '9') {
			j++
		}
		if !rowapi.IsJSONNumber(s.b[s.i:j]) {
			return nil, false
		}
		s.i = j
	default:
		for _, lit := range [...]string{"null", "true", "false"} {
			if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
				s.i += len(lit)
				return s.b[start:s.i], true
			}
		}
		return nil, false
	}
	return s.b[start:s.i], true
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// fields reads [{"column":"c","value":v},...]; an empty list only when
// allowEmpty.
func (s *scanner) fields(dst []rowapi.Field, allowEmpty bool) ([]rowapi.Field, bool) {
	if !s.eat('[') {
		return nil, false
	}
	if s.eat(']') {
		return nil, allowEmpty
	}
	for {
		if !s.eat('{') {
			return nil, false
		}
		var f rowapi.Field
		haveCol := false
		for {
			k, ok := s.key()
			if !ok || !s.eat(':') {
				return nil, false
			}
			switch {
			case string(k) == "column" && !haveCol:
				if f.Column, ok = s.name(); !ok {
					return nil, false
				}
				haveCol = true
			case string(k) == "value" && f.Value == nil:
				if f.Value, ok = s.value(); !ok {
					return nil, false
				}
			default:
				return nil, false
			}
			if s.eat('}') {
				break
			}
			if !s.eat(',') {
				return nil, false
			}
		}
		if !haveCol || f.Value == nil {
			return nil, false
		}
		dst = append(dst, f)
		if s.eat(']') {
			return dst, true
		}
		if !s.eat(',') {
			return nil, false
		}
	}
}

// readColumns reads [{"column":"c"[,"dataReturnType":"t"]},...].
func (s *scanner) readColumns(op *rowapi.Op) bool {
	if !s.eat('[') {
		return false
	}
	if s.eat(']') {
		return true
	}
	for {
		if !s.eat('{') {
			return false
		}
		col, rt := "", ""
		haveCol, haveRT := false, false
		for {
			k, ok := s.key()
			if !ok || !s.eat(':') {
				return false
			}
			switch {
			case string(k) == "column" && !haveCol:
				col, ok = s.name()
				haveCol = true
			case string(k) == "dataReturnType" && !haveRT:
				rt, ok = s.name()
				haveRT = true
			default:
				return false
			}
			if !ok {
				return false
			}
			if s.eat('}') {
				break
			}
			if !s.eat(',') {
				return false
			}
		}
		if !haveCol {
			return false
		}
		op.ReadColumns = append(op.ReadColumns, col)
		op.ReturnTypes = append(op.ReturnTypes, rt)
		if s.eat(']') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// pkObject reads one pk-* body object at the scanner's position.
func (s *scanner) pkObject(op *rowapi.Op) bool {
	if !s.eat('{') {
		return false
	}
	if s.eat('}') {
		return false // no filters: let encoding/json word it
	}
	var seenF, seenR, seenV, seenID bool
	for {
		k, ok := s.key()
		if !ok || !s.eat(':') {
			return false
		}
		switch {
		case string(k) == "filters" && !seenF:
			seenF = true
			if op.Filters, ok = s.fields(op.Filters[:0], false); !ok {
				return false
			}
		case string(k) == "values" && !seenV:
			seenV = true
			if op.Values, ok = s.fields(op.Values[:0], true); !ok {
				return false
			}
		case string(k) == "readColumns" && !seenR:
			seenR = true
			if !s.readColumns(op) {
				return false
			}
		case string(k) == "operationId" && !seenID:
			seenID = true
			v, ok := s.value()
			if !ok || len(v) == 0 || (v[0] != '"' && !rowapi.IsJSONNumber(v)) || len(v) > 258 {
				return false
			}
			if v[0] == '"' {
				inner := v[1 : len(v)-1]
				for _, c := range inner {
					if c == '\\' {
						return false
					}
				}
				if !utf8.Valid(inner) {
					return false
				}
				v = inner
			}
			op.OperationID = string(v)
		default:
			return false
		}
		if s.eat('}') {
			return seenF && len(op.Filters) > 0
		}
		if !s.eat(',') {
			return false
		}
	}
}

// end reports whether only whitespace is left.
func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// fastPK decodes a pk-* body, or says it cannot.
func fastPK(body []byte, m rowapi.Method, db, table string) (rowapi.Op, bool) {
	s := scanner{b: body}
	op := rowapi.Op{Method: m, DB: db, Table: table}
	if !s.pkObject(&op) || !s.end() {
		return rowapi.Op{}, false
	}
	return op, true
}

// fastBatch decodes a batch body whose every operation is well formed, or
// says it cannot.
func fastBatch(body []byte, maxOps int, only rowapi.Method) ([]rowapi.Op, bool) {
	s := scanner{b: body}
	if !s.eat('{') {
		return nil, false
	}
	k, ok := s.key()
	if !ok || string(k) != "operations" || !s.eat(':') || !s.eat('[') {
		return nil, false
	}
	ops := make([]rowapi.Op, 0, 16)
	for {
		if len(ops) == maxOps || !s.eat('{') {
			return nil, false
		}
		var op rowapi.Op
		var seenM, seenU, seenB bool
		for {
			k, ok := s.key()
			if !ok || !s.eat(':') {
				return nil, false
			}
			switch {
			case string(k) == "method" && !seenM:
				seenM = true
				if v, ok := s.key(); !ok || string(v) != "POST" {
					return nil, false
				}
			case string(k) == "relative-url" && !seenU:
				seenU = true
				u, ok := s.key()
				if !ok {
					return nil, false
				}
				db, table, m, ok := splitRelativeURLBytes(u)
				if !ok || only != 0 && m != only {
					return nil, false
				}
				op.DB, op.Table, op.Method = db, table, m
			case string(k) == "body" && !seenB:
				seenB = true
				if !s.pkObject(&op) {
					return nil, false
				}
			default:
				return nil, false
			}
			if s.eat('}') {
				break
			}
			if !s.eat(',') {
				return nil, false
			}
		}
		if !seenU || !seenB {
			return nil, false
		}
		ops = append(ops, op)
		if s.eat(']') {
			break
		}
		if !s.eat(',') {
			return nil, false
		}
	}
	if !s.eat('}') || !s.end() {
		return nil, false
	}
	return ops, true
}

// splitRelativeURLBytes is splitRelativeURL without allocating for the
// common names.
func splitRelativeURLBytes(u []byte) (db, table string, m rowapi.Method, ok bool) {
	u = bytes.TrimPrefix(u, []byte("/"))
	u = bytes.TrimPrefix(u, []byte(apiVersion+"/"))
	d, rest, ok1 := bytes.Cut(u, []byte("/"))
	t, op, ok2 := bytes.Cut(rest, []byte("/"))
	if !ok1 || !ok2 || len(d) == 0 || len(t) == 0 || bytes.IndexByte(op, '/') >= 0 {
		return "", "", 0, false
	}
	m, ok = rowapi.ParseMethod(string(op))
	return names.intern(d), names.intern(t), m, ok
}
