// Package auth checks API keys for the REST and gRPC front ends. Keys come from
// a YAML file; each key is granted a list of databases (row API) and
// containers (KV API). Keys are kept only as SHA-256 sums, compared in
// constant time, and never logged: a key's name stands for it in logs.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// Errors a front end maps once: the first two to 401 / Unauthenticated, the
// last to 403 / PermissionDenied.
var (
	ErrNoKey   = errors.New("an API key is required (header X-API-KEY)")
	ErrBadKey  = errors.New("the API key is not valid")
	ErrDenied  = errors.New("the API key is not granted this database or container")
	errNoEntry = errors.New("keys file has no keys")
)

// AllGrants, in a key's grants, allows every database and container.
const AllGrants = "*"

// Keys is an immutable set of API keys. A nil *Keys allows everything (auth off).
type Keys struct {
	entries []entry
}

type entry struct {
	name   string
	sum    [sha256.Size]byte
	all    bool
	grants map[string]bool
}

type fileFormat struct {
	Keys []struct {
		Name      string   `yaml:"name"`
		Key       string   `yaml:"key"`
		KeySHA256 string   `yaml:"key_sha256"`
		Grants    []string `yaml:"grants"`
	} `yaml:"keys"`
}

// Load reads a keys file.
func Load(path string) (*Keys, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("api keys file: %w", err)
	}
	k, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("api keys file %s: %w", path, err)
	}
	return k, nil
}

// Parse reads the YAML form:
//
//	keys:
//	  - name: billing            # shown in logs instead of the key
//	    key: "s3cret"            # or key_sha256: <hex of sha256(key)>
//	    grants: [shop, default]  # databases and containers; "*" for all
func Parse(data []byte) (*Keys, error) {
	var f fileFormat
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if len(f.Keys) == 0 {
		return nil, errNoEntry
	}
	k := &Keys{}
	names := map[string]bool{}
	for i, fk := range f.Keys {
		where := fmt.Sprintf("keys[%d]", i)
		if fk.Name == "" {
			return nil, fmt.Errorf("%s: needs a name (it stands for the key in logs)", where)
		}
		if names[fk.Name] {
			return nil, fmt.Errorf("%s: name %q is used twice", where, fk.Name)
		}
		names[fk.Name] = true
		e := entry{name: fk.Name, grants: map[string]bool{}}
		switch {
		case fk.Key != "" && fk.KeySHA256 != "":
			return nil, fmt.Errorf("%s (%s): give key or key_sha256, not both", where, fk.Name)
		case fk.Key != "":
			if len(fk.Key) < 16 {
				return nil, fmt.Errorf("%s (%s): key is shorter than 16 characters", where, fk.Name)
			}
			e.sum = sha256.Sum256([]byte(fk.Key))
		case fk.KeySHA256 != "":
			b, err := hex.DecodeString(fk.KeySHA256)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("%s (%s): key_sha256 must be 64 hex digits", where, fk.Name)
			}
			copy(e.sum[:], b)
		default:
			return nil, fmt.Errorf("%s (%s): needs key or key_sha256", where, fk.Name)
		}
		if len(fk.Grants) == 0 {
			return nil, fmt.Errorf("%s (%s): needs grants (database or container names, or \"*\")", where, fk.Name)
		}
		for _, g := range fk.Grants {
			if g == AllGrants {
				e.all = true
			}
			e.grants[g] = true
		}
		k.entries = append(k.entries, e)
	}
	return k, nil
}

// Enabled reports whether keys are required.
func (k *Keys) Enabled() bool { return k != nil }

// Authenticate finds the key's entry. Every entry is compared, so the time
// taken does not tell which entry, or how much of a key, matched.
func (k *Keys) Authenticate(key string) (*Principal, error) {
	if k == nil {
		return nil, nil
	}
	if key == "" {
		return nil, ErrNoKey
	}
	sum := sha256.Sum256([]byte(key))
	found := -1
	for i := range k.entries {
		if subtle.ConstantTimeCompare(sum[:], k.entries[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil, ErrBadKey
	}
	return &Principal{e: &k.entries[found]}, nil
}

// Check authenticates key and checks it is granted resource (a database or a
// container name).
func (k *Keys) Check(key, resource string) error {
	p, err := k.Authenticate(key)
	if err != nil {
		return err
	}
	return p.Allow(resource)
}

// Principal is an authenticated key. A nil *Principal (auth off) is allowed
// everything.
type Principal struct{ e *entry }

// Name is the key's name, safe to log.
func (p *Principal) Name() string {
	if p == nil {
		return ""
	}
	return p.e.name
}

// Allow reports whether the key is granted resource.
func (p *Principal) Allow(resource string) error {
	if p == nil || p.e.all || p.e.grants[resource] {
		return nil
	}
	return ErrDenied
}
