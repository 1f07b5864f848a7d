package gateway

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// A FLOAT column's value reads as mysql prints it: the shortest text of the
// float32, not of the double it is carried in.
func TestValueTextOfFloatColumns(t *testing.T) {
	f32 := ndbclient.Float(float64(float32(-10.503989)))
	assert.Equal(t, "-10.503989", string(appendValueText(nil, f32, ndbclient.TypeFloat)))
	assert.Equal(t, "-10.503989219665527", string(appendValueText(nil, f32, ndbclient.TypeDouble)), "a DOUBLE keeps every digit")
	assert.Equal(t, "0.1", string(appendValueText(nil, ndbclient.Float(0.1), ndbclient.TypeDouble)))
	assert.Equal(t, "42", string(appendValueText(nil, ndbclient.Uint(42), ndbclient.TypeUint32)))
	assert.Equal(t, "", string(appendValueText(nil, ndbclient.Null(), ndbclient.TypeFloat)))
}
