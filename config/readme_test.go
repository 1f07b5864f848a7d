package config

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// README's configuration table lists every setting, once, with the table's
// env, flag and default, and nothing else; a setting's row names its
// deprecated old names.
func TestREADMEConfigTableMatches(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## Configuration\n")
	require.True(t, ok, "README has no ## Configuration section")
	section, _, _ = strings.Cut(section, "\n## ")
	_, table, ok := strings.Cut(section, "| YAML | env | flag | default | meaning |\n|---|---|---|---|---|\n")
	require.True(t, ok, "README's configuration table header changed")
	rows, meanings := map[string][]string{}, map[string]string{}
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		require.GreaterOrEqual(t, len(cells), 7, "row %q", line)
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		key := strings.Trim(cells[1], "`")
		assert.NotContains(t, rows, key, "README lists %s twice", key)
		rows[key], meanings[key] = cells[1:5], cells[5]
	}
	code := func(s, pre string) string {
		if s == "" {
			return ""
		}
		return "`" + pre + s + "`"
	}
	for _, s := range settings {
		def := code(s.Default, "")
		if def == "" {
			def = "empty"
		}
		want := []string{code(s.Key, ""), code(s.Env, ""), code(s.Flag, "--"), def}
		got, ok := rows[s.Key]
		if assert.True(t, ok, "README's configuration table lacks %s; add: | %s | meaning |", s.Key, strings.Join(want, " | ")) {
			assert.Equal(t, want, got, "README row of %s (key, env, flag, default)", s.Key)
			for _, old := range []string{code(s.Old.Key, ""), code(s.Old.Env, ""), code(s.Old.Flag, "--")} {
				if old != "" {
					assert.Contains(t, meanings[s.Key], old, "README row of %s names its old name", s.Key)
				}
			}
		}
		delete(rows, s.Key)
	}
	assert.Empty(t, rows, "README lists settings that config/settings.go does not declare")
}
