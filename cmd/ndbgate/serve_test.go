package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/config"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
	"github.com/ndbgate/ndbgate/ndbclient/ndbclienttest"
)

// Lanes are on unless the driver completes every flight inline.
func TestDispatchLanes(t *testing.T) {
	var cfg, cfg0 config.Config
	e := newEmbedded(cfg)
	defer e.Close()
	assert.False(t, dispatchConfig(cfg, e, nil).Lanes, "embedded engine, no simulated round trip")

	cfg.Embedded.SimulatedRoundTrip = config.Duration(time.Millisecond)
	slow := newEmbedded(cfg)
	defer slow.Close()
	assert.True(t, dispatchConfig(cfg, slow, nil).Lanes, "a simulated round trip")

	persisted, err := embedded.Open(embedded.Config{DataDir: t.TempDir(), Fsync: embedded.FsyncAlways})
	require.NoError(t, err)
	defer persisted.Close()
	assert.False(t, persisted.CompletesInline())
	assert.False(t, dispatchConfig(cfg0, persisted, nil).Lanes, "fsync always: Submit never waits, and reads must not queue behind fsyncs")

	var later ndbclient.Driver = ndbclienttest.Later(e, time.Millisecond)
	assert.True(t, dispatchConfig(config.Config{}, later, nil).Lanes, "a driver that does not say it completes inline")
}
