package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ndbgate/ndbgate/config"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/ndbclienttest"
)

// Lanes are on unless the driver completes every round inline.
func TestDispatchLanes(t *testing.T) {
	var cfg config.Config
	e := newEmbedded(cfg)
	defer e.Close()
	assert.False(t, dispatchConfig(cfg, e).Lanes, "embedded engine, no simulated round trip")

	cfg.Embedded.SimulatedRoundTrip = config.Duration(time.Millisecond)
	slow := newEmbedded(cfg)
	defer slow.Close()
	assert.True(t, dispatchConfig(cfg, slow).Lanes, "a simulated round trip")

	var later ndbclient.Driver = ndbclienttest.Later(e, time.Millisecond)
	assert.True(t, dispatchConfig(config.Config{}, later).Lanes, "a driver that does not say it completes inline")
}
