package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
)

// An evicting container's parts table evicts; one a data dir holds from an
// earlier build, made without eviction, is kept as it is rather than
// refusing the start.
func TestPartsTableEvictsWithItsContainer(t *testing.T) {
	dir := t.TempDir()
	open := func() *ndbclient.Client {
		e, err := embedded.Open(embedded.Config{DataDir: dir, ReapInterval: -1})
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.Close() })
		return ndbclient.NewClient(e)
	}
	cl := open()
	got, err := ensurePartsTable(cl, gateway.ExternalValuesTable("app", "evicting"), true)
	require.NoError(t, err)
	assert.True(t, got.Eviction)
	got, err = ensurePartsTable(cl, gateway.ExternalValuesTable("app", "kept"), false)
	require.NoError(t, err)
	assert.False(t, got.Eviction)
	require.NoError(t, cl.Driver().(*embedded.Engine).Close())

	cl = open()
	for name, eviction := range map[string]bool{"evicting": true, "kept": false} {
		got, err := ensurePartsTable(cl, gateway.ExternalValuesTable("app", name), true)
		require.NoError(t, err, name)
		assert.Equal(t, eviction, got.Eviction, "%s: as the data dir made it", name)
	}
	_, err = ensurePartsTable(cl, gateway.ExternalValuesTable("app", "kept"), false)
	require.NoError(t, err)
	_, err = ensurePartsTable(cl, gateway.ExternalValuesTable("app", "evicting"), false)
	assert.Error(t, err, "a non-evicting container on evicting parts: another shape")

	// Made in this run by a container of the other kind: refused either way.
	for _, first := range []bool{true, false} {
		name := fmt.Sprint("shared_", first)
		_, err := ensurePartsTable(cl, gateway.ExternalValuesTable("app", name), first)
		require.NoError(t, err)
		_, err = ensurePartsTable(cl, gateway.ExternalValuesTable("app", name), !first)
		assert.ErrorContains(t, err, "shared by containers that evict and containers that do not", "first evicting: %v", first)
	}
}
