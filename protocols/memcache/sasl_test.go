package memcache

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Failed SASL attempts back off: each is answered later than the one before
// and holds the connection's later commands, so pipelined guesses gain
// nothing, and the saslMaxFailures-th closes the connection.
func TestSASLFailuresBackOff(t *testing.T) {
	base := saslBackoffBase
	saslBackoffBase = 5 * time.Millisecond
	t.Cleanup(func() { saslBackoffBase = base })
	creds, err := ParseCredentials(strings.NewReader("alice:wonderland\n"), "test")
	require.NoError(t, err)
	forEachLoop(t, func(t *testing.T, loop string) {
		addr, _ := startServerConfig(t, Config{EventLoop: loop, Credentials: creds}, newEngine(t))
		auth := func(pass string, opaque uint32) []byte {
			return binReq(opSaslAuth, []byte("PLAIN"), nil, []byte("\x00alice\x00"+pass), opaque, 0)
		}
		readOne := func(t *testing.T, c io.Reader) binResp {
			t.Helper()
			h := make([]byte, binHeaderLen)
			_, err := io.ReadFull(c, h)
			require.NoError(t, err)
			body := make([]byte, int(h[8])<<24|int(h[9])<<16|int(h[10])<<8|int(h[11]))
			_, err = io.ReadFull(c, body)
			require.NoError(t, err)
			r, _ := decodeResp(t, append(h, body...))
			return r
		}

		// A wrong guess, then the right password pipelined behind it: the
		// right one waits for the wrong one's answer, then succeeds.
		c := dialServer(t, addr, 10*time.Second)
		start := time.Now()
		_, err := c.Write(append(auth("wrong", 1), auth("wonderland", 2)...))
		require.NoError(t, err)
		assert.Equal(t, uint16(statusAuthError), readOne(t, c).status)
		ok := readOne(t, c)
		assert.Equal(t, [2]any{uint16(statusOK), uint32(2)}, [2]any{ok.status, ok.opaque})
		assert.GreaterOrEqual(t, time.Since(start), saslBackoffBase, "a failure is answered after the back-off")

		// Guesses pipelined on one connection: answered one by one, later
		// and later, and the fifth failure closes the connection.
		g := dialServer(t, addr, 10*time.Second)
		var guesses []byte
		for i := 0; i < saslMaxFailures+2; i++ {
			guesses = append(guesses, auth("guess", uint32(10+i))...)
		}
		start = time.Now()
		_, err = g.Write(guesses)
		require.NoError(t, err)
		var want time.Duration
		for i := 0; i < saslMaxFailures; i++ {
			want += saslBackoff(i + 1)
			r := readOne(t, g)
			assert.Equal(t, [2]any{uint16(statusAuthError), uint32(10 + i)}, [2]any{r.status, r.opaque})
			assert.GreaterOrEqual(t, time.Since(start), want, "failure %d", i+1)
		}
		_, err = g.Read(make([]byte, 1))
		assert.ErrorIs(t, err, io.EOF, "closed after %d failures, the guesses after them unanswered", saslMaxFailures)
	})
}
