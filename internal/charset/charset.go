// Package charset maps MySQL character sets, named by collation id as NDB's
// dictionary gives them, onto UTF-8 and back. It is what the row API uses
// to show a CHAR, VARCHAR or TEXT column's bytes as a JSON string (UTF-8) and
// to store a JSON string in the column's own character set. Memcache values
// never pass through here: they are the column's raw bytes.
package charset

import (
	"fmt"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
)

// Kind is a character set, as the row API treats it.
type Kind uint8

const (
	// UTF8MB4 is utf8mb4 (and collation id 0: no character set known, as the
	// embedded engine's tables): bytes are UTF-8 as they stand.
	UTF8MB4 Kind = iota
	// UTF8MB3 is MySQL's utf8 (utf8mb3): UTF-8 of at most 3 bytes a character,
	// so nothing beyond the Basic Multilingual Plane.
	UTF8MB3
	// Latin1 is MySQL's latin1, which is Windows-1252 with its five undefined
	// bytes (0x81, 0x8D, 0x8F, 0x90, 0x9D) mapped to the C1 controls of the
	// same number, so that every byte is a character and round-trips.
	Latin1
	// ASCII is 7-bit US-ASCII.
	ASCII
	// Binary is the binary character set: bytes, no conversion.
	Binary
	// Unsupported is any other character set: the row API refuses its
	// columns rather than show its bytes as something they are not.
	Unsupported
)

// Binary's collation id.
const BinaryID = 63

// Of is the character set of a MySQL collation id. 0 (none known) is UTF8MB4.
func Of(id int) Kind {
	switch {
	case id == 0:
		return UTF8MB4
	case id == 45 || id == 46 || id >= 224 && id <= 247 || id >= 255 && id <= 323:
		// 255..323: MySQL 8.0's utf8mb4_0900 collations (NDB 8.0 dictionaries).
		return UTF8MB4
	case id == 33 || id == 83 || id >= 192 && id <= 215 || id == 223 || id == 76:
		// 76: MySQL 8.0's utf8mb3_tolower_ci.
		return UTF8MB3
	case id == 5 || id == 8 || id == 15 || id == 31 || id == 47 || id == 48 || id == 49 || id == 94:
		return Latin1
	case id == 11 || id == 65:
		return ASCII
	case id == BinaryID:
		return Binary
	}
	return Unsupported
}

var kindNames = [...]string{UTF8MB4: "utf8mb4", UTF8MB3: "utf8", Latin1: "latin1", ASCII: "ascii", Binary: "binary", Unsupported: "unsupported"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Name names a collation id's character set for messages: "latin1", or
// "collation id 28" for one this package does not know.
func Name(id int) string {
	if k := Of(id); k != Unsupported {
		return k.String()
	}
	return fmt.Sprintf("collation id %d", id)
}

// MaxBytes is the longest character of a collation id's character set, in
// bytes; 0 when unknown (id 0, or a character set this package does not
// know).
func MaxBytes(id int) int {
	if id == 0 {
		return 0
	}
	switch Of(id) {
	case UTF8MB4:
		return 4
	case UTF8MB3:
		return 3
	case Latin1, ASCII, Binary:
		return 1
	}
	return 0
}

// latin1Runes is MySQL's latin1 decoding table; latin1Bytes its inverse for
// U+0080..U+FFFF (0: not in latin1; U+0000..U+007F are themselves).
var (
	latin1Runes [256]rune
	latin1Bytes map[rune]byte
)

func init() {
	latin1Bytes = make(map[rune]byte, 128)
	for i := range 256 {
		r := charmap.Windows1252.DecodeByte(byte(i))
		if r == utf8.RuneError {
			// Undefined in Windows-1252; MySQL's latin1 gives them the C1
			// control of the same number.
			r = rune(i)
		}
		latin1Runes[i] = r
		if i >= 0x80 {
			latin1Bytes[r] = byte(i)
		}
	}
}

// NotRepresentable is the error for a character the target character set
// cannot hold.
type NotRepresentable struct {
	Rune rune
	Kind Kind
}

func (e *NotRepresentable) Error() string {
	return fmt.Sprintf("character %U %q cannot be stored in %s", e.Rune, e.Rune, e.Kind)
}

// InvalidUTF8 is the error for input that is not UTF-8.
type InvalidUTF8 struct{}

func (InvalidUTF8) Error() string { return "not valid UTF-8" }

// AppendUTF8 appends src, text in k, to dst as UTF-8. A byte sequence that
// is not a character of k becomes U+FFFD (in latin1 every byte is one).
// Binary bytes are appended as they are.
func (k Kind) AppendUTF8(dst, src []byte) []byte {
	switch k {
	case Latin1:
		for _, c := range src {
			if c < utf8.RuneSelf {
				dst = append(dst, c)
			} else {
				dst = utf8.AppendRune(dst, latin1Runes[c])
			}
		}
		return dst
	case ASCII:
		for _, c := range src {
			if c < utf8.RuneSelf {
				dst = append(dst, c)
			} else {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			}
		}
		return dst
	case Binary:
		return append(dst, src...)
	}
	// UTF-8 of either width: keep valid sequences, replace the rest.
	for i := 0; i < len(src); {
		c := src[i]
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && size == 1 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		} else {
			dst = append(dst, src[i:i+size]...)
		}
		i += size
	}
	return dst
}

// Encode returns s, UTF-8, in k: s itself when k stores UTF-8 as it stands
// (and every character of s fits k), else the converted bytes appended to
// dst. A character k cannot hold is a *NotRepresentable; s that is not
// UTF-8 an InvalidUTF8 (Binary takes any bytes).
func (k Kind) Encode(dst, s []byte) ([]byte, error) {
	switch k {
	case Binary:
		return s, nil
	case UTF8MB4:
		if !utf8.Valid(s) {
			return nil, InvalidUTF8{}
		}
		return s, nil
	case ASCII:
		for i, c := range s {
			if c >= utf8.RuneSelf {
				r, _ := utf8.DecodeRune(s[i:])
				if r == utf8.RuneError {
					return nil, InvalidUTF8{}
				}
				return nil, &NotRepresentable{Rune: r, Kind: k}
			}
		}
		return s, nil
	case UTF8MB3:
		for i := 0; i < len(s); {
			if s[i] < utf8.RuneSelf {
				i++
				continue
			}
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, InvalidUTF8{}
			}
			if size > 3 {
				return nil, &NotRepresentable{Rune: r, Kind: k}
			}
			i += size
		}
		return s, nil
	case Latin1:
		if isASCII(s) {
			return s, nil
		}
		for i := 0; i < len(s); {
			c := s[i]
			if c < utf8.RuneSelf {
				dst = append(dst, c)
				i++
				continue
			}
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, InvalidUTF8{}
			}
			b, ok := latin1Bytes[r]
			if !ok {
				return nil, &NotRepresentable{Rune: r, Kind: k}
			}
			dst = append(dst, b)
			i += size
		}
		return dst, nil
	}
	return nil, fmt.Errorf("character set %s is not supported", k)
}

func isASCII(s []byte) bool {
	for _, c := range s {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
