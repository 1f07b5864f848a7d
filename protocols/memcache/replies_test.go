package memcache

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A client that pipelines gets of a large value and reads nothing for a
// while: the server stops taking its commands once its replies back up, and
// when the client reads, serves the rest, every reply whole and in order.
func TestNonReadingClientIsServedWhenItReads(t *testing.T) {
	forEachLoop(t, func(t *testing.T, loop string) {
		addr, _ := startServerConfig(t, Config{EventLoop: loop}, newEngine(t))
		const value, gets = 1 << 20, 40
		v := strings.Repeat("b", value)
		c := dialServer(t, addr, 30*time.Second)
		r := bufio.NewReaderSize(c, 1<<20)
		_, err := fmt.Fprintf(c, "set big 0 0 %d\r\n%s\r\n", value, v)
		require.NoError(t, err)
		require.Equal(t, []string{"STORED\r\n"}, readLines(t, r, 1))
		_, err = c.Write([]byte(strings.Repeat("get big\r\n", gets) + "get nothere\r\n"))
		require.NoError(t, err)
		time.Sleep(200 * time.Millisecond)
		head := fmt.Sprintf("VALUE big 0 %d\r\n", value)
		for i := 0; i < gets; i++ {
			line, err := r.ReadString('\n')
			require.NoError(t, err, "reply %d", i)
			require.Equal(t, head, line, "reply %d", i)
			b := make([]byte, value+len("\r\nEND\r\n"))
			_, err = io.ReadFull(r, b)
			require.NoError(t, err, "reply %d", i)
			require.True(t, string(b) == v+"\r\nEND\r\n", "reply %d", i)
		}
		require.Equal(t, []string{"END\r\n"}, readLines(t, r, 1))
	})
}

// A get of many keys goes in pieces; the client sees one reply, END once.
func TestAGetOfManyKeysAnswersAsOne(t *testing.T) {
	forEachLoop(t, func(t *testing.T, loop string) {
		addr, srv := startServerConfig(t, Config{EventLoop: loop}, newEngine(t))
		c := dialServer(t, addr, 30*time.Second)
		r := bufio.NewReader(c)
		big := strings.Repeat("b", 1<<20)
		_, err := fmt.Fprintf(c, "set big 0 0 %d\r\n%s\r\n", len(big), big)
		require.NoError(t, err)
		require.Equal(t, []string{"STORED\r\n"}, readLines(t, r, 1))
		require.Greater(t, 100, srv.svc.MultiGetPiece(), "a 1 MiB value held makes pieces")
		var get strings.Builder
		get.WriteString("gets")
		for i := 0; i < 100; i++ {
			if i%3 != 0 {
				_, err := fmt.Fprintf(c, "set k%d %d 0 %d\r\nv%d\r\n", i, i, len(fmt.Sprint(i))+1, i)
				require.NoError(t, err)
				require.Equal(t, []string{"STORED\r\n"}, readLines(t, r, 1))
			}
			fmt.Fprintf(&get, " k%d", i)
		}
		_, err = c.Write([]byte(get.String() + "\r\n"))
		require.NoError(t, err)
		for i := 0; i < 100; i++ {
			if i%3 == 0 {
				continue
			}
			line, err := r.ReadString('\n')
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(line, fmt.Sprintf("VALUE k%d %d %d ", i, i, len(fmt.Sprint(i))+1)), "%q", line)
			require.Equal(t, []string{fmt.Sprintf("v%d\r\n", i)}, readLines(t, r, 1))
		}
		require.Equal(t, []string{"END\r\n"}, readLines(t, r, 1))
		_, err = c.Write([]byte("version\r\n"))
		require.NoError(t, err)
		require.Equal(t, []string{"VERSION test\r\n"}, readLines(t, r, 1), "nothing left over")
	})
}
