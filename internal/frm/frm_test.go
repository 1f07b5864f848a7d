package frm

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sample is testdata/frm_sample.packed-frm unpacked (see testdata/README.md).
func sample(t testing.TB) (packed, raw []byte) {
	packed, err := os.ReadFile("testdata/frm_sample.packed-frm")
	require.NoError(t, err)
	raw, err = Unpack(packed)
	require.NoError(t, err)
	return packed, raw
}

func TestParseSample(t *testing.T) {
	_, raw := sample(t)
	require.Len(t, raw, 0x23a2, "the header's original length")
	def, err := Parse(raw)
	require.NoError(t, err)
	var names []string
	for _, f := range def.Fields {
		names = append(names, f.Name)
	}
	assert.Equal(t, []string{"id", "c_l1", "v_l1", "c_u4", "v_u4", "v_u3", "v_as", "c_bin", "e", "e_u4", "e_l1",
		"e_same", "s", "s_u4", "d10", "doc", "b"}, names)

	for name, cs := range map[string]int{"c_l1": 8, "v_l1": 8, "c_u4": 45, "v_u4": 45, "v_u3": 33, "v_as": 11, "c_bin": 63, "doc": 8, "b": 63} {
		assert.Equal(t, cs, def.Field(name).Charset, name)
	}
	bs := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i := range s {
			out[i] = []byte(s[i])
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		enum  bool
		names [][]byte
		cs    int
	}{
		{"e", true, bs("a", "b", "c"), 8},
		{"e_u4", true, bs("café", "naïve", "😀", ""), 45},
		// latin1 bytes: ÿ is 0xFF, so the separator is neither 0xFF nor ','.
		{"e_l1", true, [][]byte{{0xFF, 'e', 's'}, []byte("a,b"), []byte("no")}, 8},
		{"e_same", true, bs("a", "b", "c"), 8},
		{"s", false, bs("x", "y", "z"), 8},
		{"s_u4", false, bs("α", "β", "γ", "δ", "ε", "ζ", "η", "θ", "ι"), 45},
	} {
		f := def.Field(tc.name)
		require.NotNil(t, f, tc.name)
		assert.Equal(t, tc.enum, f.IsEnum(), tc.name)
		assert.Equal(t, !tc.enum, f.IsSet(), tc.name)
		assert.Equal(t, tc.names, f.Names, tc.name)
		assert.Equal(t, tc.cs, f.Charset, tc.name)
		if tc.enum {
			assert.Equal(t, byte(TypeEnum), f.Type)
			assert.Equal(t, "ENUM", f.TypeName())
		} else {
			assert.Equal(t, byte(TypeSet), f.Type)
			assert.Equal(t, "SET", f.TypeName())
		}
	}
	for _, name := range []string{"id", "c_l1", "v_u4", "c_bin", "d10"} {
		f := def.Field(name)
		assert.False(t, f.IsEnum() || f.IsSet(), name)
		assert.Nil(t, f.Names, name)
		assert.Equal(t, "", f.TypeName(), name)
	}
	assert.Equal(t, byte(TypeNewDecimal), def.Field("d10").Type)
	assert.Equal(t, "TEXT", def.Field("doc").TypeName())
	assert.Equal(t, "BLOB", def.Field("b").TypeName())
	assert.Nil(t, def.Field("nope"))
}

// A packed definition stored as it is (compressing did not shrink it) has
// both lengths equal.
func TestUnpackStored(t *testing.T) {
	_, raw := sample(t)
	p := binary.LittleEndian.AppendUint32(nil, 1)
	p = binary.LittleEndian.AppendUint32(p, uint32(len(raw)))
	p = binary.LittleEndian.AppendUint32(p, uint32(len(raw)))
	got, err := Unpack(append(p, raw...))
	require.NoError(t, err)
	assert.Equal(t, raw, got)
}

func TestUnpackRefusals(t *testing.T) {
	packed, raw := sample(t)
	hdr := func(ver, orig, stored uint32) []byte {
		b := binary.LittleEndian.AppendUint32(nil, ver)
		b = binary.LittleEndian.AppendUint32(b, orig)
		return binary.LittleEndian.AppendUint32(b, stored)
	}
	for name, b := range map[string][]byte{
		"short":        packed[:8],
		"version":      append(hdr(2, 10, 10), make([]byte, 10)...),
		"huge":         hdr(1, 1<<30, 100),
		"truncated":    packed[:len(packed)-10],
		"not zlib":     append(hdr(1, 100, 10), make([]byte, 10)...),
		"lying length": append(hdr(1, uint32(len(raw))+5, uint32(len(packed)-12)), packed[12:]...),
		"fewer bytes":  append(hdr(1, uint32(len(raw))-5, uint32(len(packed)-12)), packed[12:]...),
	} {
		_, err := Unpack(b)
		assert.Error(t, err, name)
	}
}

func TestParseRefusals(t *testing.T) {
	_, raw := sample(t)
	mod := func(f func(b []byte)) []byte {
		b := append([]byte(nil), raw...)
		f(b)
		return b
	}
	form := int(binary.LittleEndian.Uint32(raw[64+int(binary.LittleEndian.Uint16(raw[4:])):]))
	for name, b := range map[string][]byte{
		"short":      raw[:63],
		"magic":      mod(func(b []byte) { b[0] = 0 }),
		"old format": mod(func(b []byte) { b[2] = 8 }),
		"no form":    mod(func(b []byte) { b[8], b[9] = 0, 0 }),
		"form past":  mod(func(b []byte) { binary.LittleEndian.PutUint16(b[4:], 0xFFF0) }),
		"no fields":  mod(func(b []byte) { binary.LittleEndian.PutUint16(b[form+258:], 0) }),
		"more names": mod(func(b []byte) { binary.LittleEndian.PutUint16(b[form+258:], 18) }),
		"intervals":  mod(func(b []byte) { binary.LittleEndian.PutUint16(b[form+270:], 9) }),
		"truncated":  raw[:len(raw)-40],
	} {
		_, err := Parse(b)
		assert.Error(t, err, name)
	}
}

// FuzzParse: no input panics; one that parses has as many names as fields.
func FuzzParse(f *testing.F) {
	_, raw := sample(f)
	f.Add(raw)
	f.Add(raw[:len(raw)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		def, err := Parse(b)
		if err != nil {
			return
		}
		for i := range def.Fields {
			fl := &def.Fields[i]
			if (fl.IsEnum() || fl.IsSet()) != (fl.Names != nil) {
				t.Fatalf("field %q: names %v for pack flags %#x", fl.Name, fl.Names, fl.PackFlag)
			}
			_ = fl.TypeName()
		}
	})
}

// FuzzUnpack: no packed input panics or unpacks past its promised length.
func FuzzUnpack(f *testing.F) {
	packed, raw := sample(f)
	f.Add(packed)
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	_, _ = w.Write(raw[:100])
	_ = w.Close()
	b := binary.LittleEndian.AppendUint32(nil, 1)
	b = binary.LittleEndian.AppendUint32(b, 100)
	b = binary.LittleEndian.AppendUint32(b, uint32(z.Len()))
	f.Add(append(b, z.Bytes()...))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := Unpack(b)
		if err != nil {
			return
		}
		if len(b) >= 8 && len(out) != int(binary.LittleEndian.Uint32(b[4:])) {
			t.Fatalf("unpacked %d bytes, promised %d", len(out), binary.LittleEndian.Uint32(b[4:]))
		}
		_, _ = Parse(out)
	})
}
