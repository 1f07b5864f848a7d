package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeys(t *testing.T) {
	sum := sha256.Sum256([]byte("hashed-key-0123456789"))
	k, err := Parse([]byte(`
keys:
  - name: shop
    key: "shop-key-0123456789"
    grants: [shop, default]
  - name: admin
    key_sha256: "` + hex.EncodeToString(sum[:]) + `"
    grants: ["*"]
`))
	require.NoError(t, err)
	assert.True(t, k.Enabled())
	assert.NoError(t, k.Check("shop-key-0123456789", "shop"))
	assert.NoError(t, k.Check("shop-key-0123456789", "default"))
	assert.ErrorIs(t, k.Check("shop-key-0123456789", "other"), ErrDenied)
	assert.NoError(t, k.Check("hashed-key-0123456789", "anything"))
	assert.ErrorIs(t, k.Check("", "shop"), ErrNoKey)
	assert.ErrorIs(t, k.Check("shop-key-012345678", "shop"), ErrBadKey)
	p, err := k.Authenticate("hashed-key-0123456789")
	require.NoError(t, err)
	assert.Equal(t, "admin", p.Name())

	var off *Keys
	assert.False(t, off.Enabled())
	assert.NoError(t, off.Check("", "x"))
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`keys: []`, "no keys"},
		{`keys: [{key: "0123456789abcdefg", grants: [a]}]`, "needs a name"},
		{`keys: [{name: a, key: "short", grants: [a]}]`, "shorter than 16"},
		{`keys: [{name: a, key_sha256: "zz", grants: [a]}]`, "64 hex digits"},
		{`keys: [{name: a, grants: [a]}]`, "needs key or key_sha256"},
		{`keys: [{name: a, key: "0123456789abcdefg"}]`, "needs grants"},
		{`keys: [{name: a, key: "0123456789abcdefg", grants: [a]}, {name: a, key: "0123456789abcdefh", grants: [a]}]`, "used twice"},
		{`keys: [{name: a, key: "0123456789abcdefg", grants: [a], extra: 1}]`, "extra"},
	} {
		_, err := Parse([]byte(tc.yaml))
		require.Error(t, err, tc.yaml)
		assert.Contains(t, err.Error(), tc.want)
	}
}
