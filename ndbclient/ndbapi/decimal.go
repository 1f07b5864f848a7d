package ndbapi

import (
	"bytes"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// NDB stores DECIMAL in MySQL's binary decimal format: the digits in groups
// of nine, each group a big-endian integer of 4 bytes, and a shorter group
// (dig2bytes) for the digits left over at the far ends: the leading digits of
// the integer part and the trailing digits of the fraction. A negative number
// has every byte inverted, and the top bit of the first byte is flipped, so
// the bytes compare with memcmp in numeric order.

var dig2bytes = [10]int{0, 1, 1, 2, 2, 3, 3, 4, 4, 4}

const digitsPerGroup = 9

// decimalSize is the bytes of a DECIMAL(prec, scale).
func decimalSize(prec, scale int) int {
	intg := prec - scale
	return intg/digitsPerGroup*4 + dig2bytes[intg%digitsPerGroup] +
		scale/digitsPerGroup*4 + dig2bytes[scale%digitsPerGroup]
}

// appendDecimal appends the decimal text s ("-12.50", "+3", "0.5") in the
// binary format of c. It refuses, rather than rounds, digits the column cannot
// hold.
func appendDecimal(dst []byte, c *column, s []byte) ([]byte, error) {
	bad := func(why string) ([]byte, error) {
		return dst, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "DECIMAL(%d,%d) value %.40q: %s", c.precision, c.scale, s, why)
	}
	if !decimalShapeOK(c) {
		return bad("the column's precision and scale are out of range")
	}
	neg := false
	t := s
	if len(t) > 0 && (t[0] == '-' || t[0] == '+') {
		neg = t[0] == '-'
		t = t[1:]
	}
	intPart, frac, _ := bytes.Cut(t, []byte{'.'})
	if len(intPart) == 0 && len(frac) == 0 {
		return bad("not a decimal number")
	}
	if !allDigits(intPart) || !allDigits(frac) {
		return bad("not a decimal number")
	}
	intPart = bytes.TrimLeft(intPart, "0")
	intg := c.precision - c.scale
	if len(intPart) > intg {
		return bad("out of range")
	}
	if len(frac) > c.scale {
		if len(bytes.Trim(frac[c.scale:], "0")) > 0 {
			return bad("more decimals than the column's scale")
		}
		frac = frac[:c.scale]
	}
	if neg && len(intPart) == 0 && len(bytes.Trim(frac, "0")) == 0 {
		neg = false // -0 is 0
	}
	if neg && c.ndbType == ndbDecimalunsigned {
		return bad("negative value for an UNSIGNED column")
	}
	// Every digit position of the column, integer part right-aligned and
	// fraction left-aligned, as ASCII digits.
	var buf [130]byte
	digits := buf[:0]
	for i := len(intPart); i < intg; i++ {
		digits = append(digits, '0')
	}
	digits = append(digits, intPart...)
	digits = append(digits, frac...)
	for i := len(frac); i < c.scale; i++ {
		digits = append(digits, '0')
	}
	start := len(dst)
	// Integer part: the leading partial group, then the full ones.
	lead := intg % digitsPerGroup
	dst = appendGroup(dst, digits[:lead], neg)
	for i := lead; i < intg; i += digitsPerGroup {
		dst = appendGroup(dst, digits[i:i+digitsPerGroup], neg)
	}
	// Fraction: the full groups, then the trailing partial one.
	f := digits[intg:]
	full := c.scale / digitsPerGroup * digitsPerGroup
	for i := 0; i < full; i += digitsPerGroup {
		dst = appendGroup(dst, f[i:i+digitsPerGroup], neg)
	}
	dst = appendGroup(dst, f[full:], neg)
	if len(dst) > start {
		dst[start] ^= 0x80
	}
	return dst, nil
}

// appendGroup appends the digits (at most nine) as a big-endian integer of
// dig2bytes[len] bytes, inverted for a negative number.
func appendGroup(dst []byte, digits []byte, neg bool) []byte {
	var v uint32
	for _, d := range digits {
		v = v*10 + uint32(d-'0')
	}
	if neg {
		v = ^v
	}
	n := dig2bytes[len(digits)]
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, byte(v>>(8*i)))
	}
	return dst
}

// decodeDecimal turns the binary format back into canonical text: no leading
// zeros, exactly scale decimals, no "-0". ok is false for bytes no encoder
// produces (a group out of range or the wrong length).
func decodeDecimal(c *column, b []byte) (string, bool) {
	if !decimalShapeOK(c) || len(b) != decimalSize(c.precision, c.scale) || len(b) == 0 {
		return "", false
	}
	neg := b[0]&0x80 == 0
	var buf [130]byte
	digits := buf[:0]
	pos := 0
	group := func(n int) bool { // reads one group of n digits
		size := dig2bytes[n]
		var v uint32
		for i := 0; i < size; i++ {
			x := b[pos+i]
			if pos+i == 0 {
				x ^= 0x80
			}
			if neg {
				x = ^x
			}
			v = v<<8 | uint32(x)
		}
		pos += size
		start := len(digits)
		for i := 0; i < n; i++ {
			digits = append(digits, '0')
		}
		for i := len(digits) - 1; i >= start; i-- {
			digits[i] = byte('0' + v%10)
			v /= 10
		}
		return v == 0
	}
	intg := c.precision - c.scale
	ok := group(intg % digitsPerGroup)
	for i := intg % digitsPerGroup; i < intg; i += digitsPerGroup {
		ok = group(digitsPerGroup) && ok
	}
	for i := 0; i < c.scale/digitsPerGroup; i++ {
		ok = group(digitsPerGroup) && ok
	}
	ok = group(c.scale%digitsPerGroup) && ok
	if !ok {
		return "", false
	}
	intDigits := bytes.TrimLeft(digits[:intg], "0")
	frac := digits[intg:]
	zero := len(intDigits) == 0 && len(bytes.Trim(frac, "0")) == 0
	out := make([]byte, 0, len(digits)+3)
	if neg && !zero {
		out = append(out, '-')
	}
	if len(intDigits) == 0 {
		out = append(out, '0')
	}
	out = append(out, intDigits...)
	if c.scale > 0 {
		out = append(out, '.')
		out = append(out, frac...)
	}
	return string(out), true
}

// decimalShapeOK: MySQL's DECIMAL takes 1..65 digits, at most 30 of them
// decimals.
func decimalShapeOK(c *column) bool {
	return c.precision >= 1 && c.precision <= 65 && c.scale >= 0 && c.scale <= 30 && c.scale <= c.precision
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
