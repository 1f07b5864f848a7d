package charset

import (
	"bufio"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// testdata/latin1-mysql.txt is mysqld's own latin1 table: for each byte,
// HEX(CONVERT(CONVERT(UNHEX(byte) USING latin1) USING utf8mb4)) from MySQL 5.7.
func TestLatin1IsMySQLs(t *testing.T) {
	f, err := os.Open("testdata/latin1-mysql.txt")
	require.NoError(t, err)
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		require.Len(t, fields, 2)
		b, err := hex.DecodeString(fields[0])
		require.NoError(t, err)
		want, err := hex.DecodeString(fields[1])
		require.NoError(t, err)
		got := Latin1.AppendUTF8(nil, b)
		require.Equal(t, want, got, "byte %s", fields[0])
		back, err := Latin1.Encode(nil, got)
		require.NoError(t, err)
		require.Equal(t, b, back, "byte %s back from UTF-8", fields[0])
		n++
	}
	require.NoError(t, sc.Err())
	require.Equal(t, 256, n)
}

func TestOf(t *testing.T) {
	for id, want := range map[int]Kind{
		0: UTF8MB4, 45: UTF8MB4, 46: UTF8MB4, 224: UTF8MB4, 247: UTF8MB4, 255: UTF8MB4,
		33: UTF8MB3, 83: UTF8MB3, 192: UTF8MB3, 215: UTF8MB3, 223: UTF8MB3,
		5: Latin1, 8: Latin1, 15: Latin1, 31: Latin1, 47: Latin1, 48: Latin1, 49: Latin1, 94: Latin1,
		11: ASCII, 65: ASCII, 63: Binary,
		1: Unsupported, 28: Unsupported, 35: Unsupported, 54: Unsupported, 248: Unsupported,
	} {
		require.Equal(t, want, Of(id), "collation %d", id)
	}
	require.Equal(t, 4, MaxBytes(45))
	require.Equal(t, 3, MaxBytes(33))
	require.Equal(t, 1, MaxBytes(8))
	require.Equal(t, 1, MaxBytes(63))
	require.Equal(t, 0, MaxBytes(0))
	require.Equal(t, 0, MaxBytes(28))
	require.Equal(t, "latin1", Name(8))
	require.Equal(t, "collation id 28", Name(28))
}

func TestEncode(t *testing.T) {
	// latin1: café is 63 61 66 E9; ASCII input comes back as it is.
	got, err := Latin1.Encode(nil, []byte("café"))
	require.NoError(t, err)
	require.Equal(t, []byte{'c', 'a', 'f', 0xE9}, got)
	in := []byte("plain")
	got, err = Latin1.Encode(nil, in)
	require.NoError(t, err)
	require.Equal(t, &in[0], &got[0], "no copy for ASCII")
	got, err = Latin1.Encode(nil, []byte("€Š\u0081"))
	require.NoError(t, err)
	require.Equal(t, []byte{0x80, 0x8A, 0x81}, got)

	var nr *NotRepresentable
	_, err = Latin1.Encode(nil, []byte("zł"))
	require.ErrorAs(t, err, &nr)
	require.Equal(t, 'ł', nr.Rune)
	require.Contains(t, err.Error(), "latin1")
	_, err = Latin1.Encode(nil, []byte("😀"))
	require.ErrorAs(t, err, &nr)

	_, err = ASCII.Encode(nil, []byte("café"))
	require.ErrorAs(t, err, &nr)
	require.Equal(t, 'é', nr.Rune)
	got, err = ASCII.Encode(nil, []byte("cafe"))
	require.NoError(t, err)
	require.Equal(t, "cafe", string(got))

	got, err = UTF8MB3.Encode(nil, []byte("naïve €"))
	require.NoError(t, err)
	require.Equal(t, "naïve €", string(got))
	_, err = UTF8MB3.Encode(nil, []byte("a😀"))
	require.ErrorAs(t, err, &nr)
	require.Equal(t, '😀', nr.Rune)
	require.Contains(t, err.Error(), "utf8")

	got, err = UTF8MB4.Encode(nil, []byte("a😀"))
	require.NoError(t, err)
	require.Equal(t, "a😀", string(got))

	for _, k := range []Kind{UTF8MB4, UTF8MB3, Latin1, ASCII} {
		_, err = k.Encode(nil, []byte{'a', 0xff})
		require.ErrorIs(t, err, InvalidUTF8{}, "%s", k)
	}
	got, err = Binary.Encode(nil, []byte{0xff, 0})
	require.NoError(t, err)
	require.Equal(t, []byte{0xff, 0}, got)
	_, err = Unsupported.Encode(nil, []byte("a"))
	require.Error(t, err)
}

func TestAppendUTF8(t *testing.T) {
	require.Equal(t, "caf\uFFFD", string(ASCII.AppendUTF8(nil, []byte{'c', 'a', 'f', 0xE9})))
	require.Equal(t, "café", string(Latin1.AppendUTF8([]byte("c"), []byte{'a', 'f', 0xE9})))
	require.Equal(t, "a\uFFFDb", string(UTF8MB4.AppendUTF8(nil, []byte{'a', 0xff, 'b'})))
	require.Equal(t, "😀", string(UTF8MB4.AppendUTF8(nil, []byte("😀"))))
	require.Equal(t, []byte{0xff}, Binary.AppendUTF8(nil, []byte{0xff}))
}
