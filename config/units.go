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

// PollLimit is a busy poll's limit: a duration, 0 for off, or "auto"
// (PollAuto), ndbgate's own limit for that poll where it applies.
type PollLimit Duration

// PollAuto is "auto".
const PollAuto PollLimit = -1

// Set parses "auto" or a duration.
func (p *PollLimit) Set(s string) error {
	if strings.TrimSpace(s) == "auto" {
		*p = PollAuto
		return nil
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("want auto, or a duration such as 50us or 200us (0 = off)")
	}
	*p = PollLimit(v)
	return nil
}

// UnmarshalYAML accepts what Set does.
func (p *PollLimit) UnmarshalYAML(n *yaml.Node) error {
	if err := p.Set(n.Value); err != nil {
		return fmt.Errorf("line %d: %q: %v", n.Line, n.Value, err)
	}
	return nil
}

func (p PollLimit) String() string {
	if p == PollAuto {
		return "auto"
	}
	return time.Duration(p).String()
}

// Or is the limit, auto standing for the limit given.
func (p PollLimit) Or(auto time.Duration) time.Duration {
	if p == PollAuto {
		return auto
	}
	return time.Duration(p)
}
