package memcache

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"
	"time"
)

// Credentials are the users allowed in by SASL PLAIN, read from a file of
// "user:password" lines (memcached's -Y format; '#' starts a comment).
// Passwords are never logged or shown.
type Credentials struct {
	users map[string][]byte
}

// LoadCredentials reads a credentials file.
func LoadCredentials(path string) (*Credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("memcache credentials file: %w", err)
	}
	defer f.Close()
	return ParseCredentials(f, path)
}

// ParseCredentials reads "user:password" lines from r; name is for messages.
func ParseCredentials(r interface{ Read([]byte) (int, error) }, name string) (*Credentials, error) {
	c := &Credentials{users: map[string][]byte{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		user, pass, ok := strings.Cut(line, ":")
		if !ok || user == "" || pass == "" {
			return nil, fmt.Errorf("memcache credentials file %s line %d: want user:password", name, n)
		}
		if _, dup := c.users[user]; dup {
			return nil, fmt.Errorf("memcache credentials file %s line %d: user %q listed twice", name, n, user)
		}
		c.users[user] = []byte(pass)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("memcache credentials file %s: %w", name, err)
	}
	if len(c.users) == 0 {
		return nil, fmt.Errorf("memcache credentials file %s: no users", name)
	}
	return c, nil
}

// checkPlain checks a SASL PLAIN response: [authzid] NUL authcid NUL passwd.
func (c *Credentials) checkPlain(resp []byte) bool {
	parts := bytes.SplitN(resp, []byte{0}, 3)
	if len(parts) != 3 {
		return false
	}
	authz, user, pass := parts[0], parts[1], parts[2]
	if len(authz) > 0 && !bytes.Equal(authz, user) {
		return false // no proxy authorization
	}
	want, ok := c.users[string(user)]
	if !ok {
		want = []byte{0} // compare anyway: do not reveal which users exist by timing
	}
	return subtle.ConstantTimeCompare(pass, want) == 1 && ok
}

var (
	saslMechs         = []byte("PLAIN")
	saslAuthenticated = []byte("Authenticated")
)

// needsAuth reports whether cmd must wait for authentication: everything but
// the SASL commands and VERSION, as memcached's authenticated().
func (cs *connState) needsAuth(cmd *Command) bool {
	if cs.srv.cfg.Credentials == nil || cs.authed {
		return false
	}
	switch cmd.Opcode {
	case opSaslList, opSaslAuth, opSaslStep, opVersion:
		return false
	}
	return true
}

// dispatchSASL answers the SASL commands.
func (cs *connState) dispatchSASL(cmd *Command, fixed func([]byte)) {
	creds := cs.srv.cfg.Credentials
	if creds == nil { // as memcached without -S
		fixed(appendBinError(nil, cmd.Opcode, cmd.Opaque, statusUnknownCommand))
		return
	}
	switch cmd.Kind {
	case CmdSaslList:
		b := appendBinHeader(nil, cmd.Opcode, 0, 0, statusOK, len(saslMechs), cmd.Opaque, 0)
		fixed(append(b, saslMechs...))
		return
	case CmdSaslAuth:
		if string(cmd.Arg) == "PLAIN" && creds.checkPlain(cmd.Data) {
			cs.authed = true
			cs.srv.m.countAuth(authOK)
			b := appendBinHeader(nil, cmd.Opcode, 0, 0, statusOK, len(saslAuthenticated), cmd.Opaque, 0)
			fixed(append(b, saslAuthenticated...))
			return
		}
	}
	// A wrong mechanism, wrong credentials, or a STEP (PLAIN has one step).
	// Each failure answers later than the one before, and holds the
	// connection's later commands (pipelined guesses) until it does; after
	// saslMaxFailures the connection is closed.
	cs.srv.m.countAuth(authFailure)
	cs.authFailures++
	p := cs.newBinPending(cmd)
	p.fixed = appendBinError(p.fixed, cmd.Opcode, cmd.Opaque, statusAuthError)
	p.barrier = true
	time.AfterFunc(saslBackoff(cs.authFailures), func() { p.complete(nil) })
	cs.waiting(p)
	if cs.authFailures >= saslMaxFailures {
		cs.closeAfter = true
	}
}

// A failed SASL attempt is answered after saslBackoffBase, doubled for each
// failure before it on the connection, at most saslBackoffMax; the
// saslMaxFailures-th closes the connection. Variables for tests.
var (
	saslBackoffBase = 100 * time.Millisecond
	saslBackoffMax  = 2 * time.Second
	saslMaxFailures = 5
)

func saslBackoff(failures int) time.Duration {
	return min(saslBackoffBase<<min(failures-1, 16), saslBackoffMax)
}
