package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// ByteSize is a byte count written as 1048576, 1m, 64k, 2g (binary units).
type ByteSize uint64

// Set parses s.
func (b *ByteSize) Set(s string) error {
	s = strings.TrimSpace(strings.ToLower(s))
	mult := uint64(1)
	s = strings.TrimSuffix(strings.TrimSuffix(s, "ib"), "b")
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k':
			mult, s = 1<<10, s[:n-1]
		case 'm':
			mult, s = 1<<20, s[:n-1]
		case 'g':
			mult, s = 1<<30, s[:n-1]
		}
	}
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return fmt.Errorf("want a size like 1048576, 64k, 1m or 2g")
	}
	if n > (1<<64-1)/mult {
		return fmt.Errorf("size too large")
	}
	*b = ByteSize(n * mult)
	return nil
}

func (b ByteSize) String() string { return strconv.FormatUint(uint64(b), 10) }

// UnmarshalYAML accepts numbers and strings.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if err := b.Set(n.Value); err != nil {
		return fmt.Errorf("line %d: %q: %v", n.Line, n.Value, err)
	}
	return nil
}

// Duration is a time.Duration written as "1s", "250ms".
type Duration time.Duration

// UnmarshalYAML parses Go duration syntax.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q: want a duration like 1s or 250ms", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// Set parses a duration from a flag or environment variable.
func (d *Duration) Set(s string) error {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("want a duration such as 100us, 5ms or 1s")
	}
	*d = Duration(v)
	return nil
}
