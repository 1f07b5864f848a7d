//go:build race

package embedded

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// pooled paths allocate under -race.
const raceEnabled = true
