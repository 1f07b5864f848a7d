//go:build ndbapi

package ndb

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// seqDatabase holds the sequence tests' tables.
const seqDatabase = "ndbgate_seqtest"

// seqParts is ndbmemcache's external_values shape: parts of a large value
// numbered by the id column's AUTO_INCREMENT sequence.
func seqParts(name string) *ndbclient.Table {
	return &ndbclient.Table{Database: seqDatabase, Name: name, ExpireColumn: -1, PrimaryKey: []int{0, 1},
		Columns: []ndbclient.Column{
			{Name: "id", Type: ndbclient.TypeUint32, AutoIncrement: true},
			{Name: "part", Type: ndbclient.TypeInt16},
			{Name: "content", Type: ndbclient.TypeVarbinary, Length: 100},
		}}
}

// TestNextAutoIncrementOnNDB: a table made through the driver with an
// AutoIncrement column has a sequence from 1, described as such; its values
// strictly increase, and another driver (its own Ndb object and reserved
// range) never takes the same ones. A table without such a column, a
// canceled context and a dropped table (once the driver knows) are refused.
func TestNextAutoIncrementOnNDB(t *testing.T) {
	cs := connectstring(t)
	d := openDriver(t, cs, 2)
	other := openDriver(t, cs, 1) // creates and drops, describes nothing
	want := seqParts("driver_parts")
	tbl := freshTable(t, other, d, want)
	t.Cleanup(func() { _, _ = other.DropNDBTable(want.Database, want.Name) })
	require.True(t, tbl.Columns[0].AutoIncrement, "id is described as AUTO_INCREMENT")
	assert.False(t, tbl.Columns[1].AutoIncrement)
	assert.False(t, tbl.Columns[2].AutoIncrement)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []uint64
	for range 3 {
		v, err := d.NextAutoIncrement(ctx, tbl)
		require.NoError(t, err)
		got = append(got, v)
	}
	t.Logf("values: %v", got)
	assert.Equal(t, uint64(1), got[0], "a new table's sequence starts at 1")
	for i := 1; i < len(got); i++ {
		assert.Greater(t, got[i], got[i-1], "values strictly increase: %v", got)
	}

	third := openDriver(t, cs, 1)
	tbl3, err := third.Table(want.Database, want.Name)
	require.NoError(t, err)
	for range 3 {
		v, err := third.NextAutoIncrement(ctx, tbl3)
		require.NoError(t, err)
		assert.NotContains(t, got, v, "another driver's value")
		got = append(got, v)
	}
	t.Logf("values with another driver's: %v", got)

	plain := &ndbclient.Table{Database: seqDatabase, Name: "no_sequence", ExpireColumn: -1, PrimaryKey: []int{0},
		Columns: []ndbclient.Column{{Name: "id", Type: ndbclient.TypeUint32}}}
	plainTbl := freshTable(t, other, d, plain)
	t.Cleanup(func() { _, _ = other.DropNDBTable(plain.Database, plain.Name) })
	_, err = d.NextAutoIncrement(ctx, plainTbl)
	assert.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(err), "no AUTO_INCREMENT column: %v", err)

	canceled, stop := context.WithCancel(ctx)
	stop()
	_, err = d.NextAutoIncrement(canceled, tbl)
	assert.Equal(t, ndbclient.CodeTemporary, ndbclient.CodeOf(err), "a canceled context: %v", err)

	// Dropped by another client: NDB tells this one nothing, and the
	// sequence's row outlives its table, so values keep coming until an op
	// on the table fails and the driver looks it up again. Then a schema
	// error (at first, perhaps, Temporary while it is looked up).
	_, err = other.DropNDBTable(want.Database, want.Name)
	require.NoError(t, err)
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err = d.NextAutoIncrement(ctx, tbl)
		if ndbclient.CodeOf(err) == ndbclient.CodeSchemaError {
			break
		}
		require.True(t, err == nil || ndbclient.CodeOf(err) == ndbclient.CodeTemporary, "a dropped table: %v", err)
		require.True(t, time.Now().Before(deadline), "a dropped table's sequence did not fail with a schema error: %v", err)
		read := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: []ndbclient.Value{ndbclient.Uint(1), ndbclient.Int(0)}}
		require.NoError(t, d.Execute(ctx, &ndbclient.Batch{Ops: []*ndbclient.Op{read}}))
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("a dropped table: %v", err)
}

// TestNextAutoIncrementSharedWithMysqld: a table made by mysqld with an
// AUTO_INCREMENT id (external_values' shape) is described with the column
// marked, and the driver draws from the sequence mysqld's inserts use: an
// explicit id of 500 inserted in SQL moves it past 500, and an SQL insert
// without an id afterwards takes a value past those the driver reserved.
// After a copying ALTER the driver draws from the new table's sequence.
// Needs NDBGATE_TEST_MYSQL.
func TestNextAutoIncrementSharedWithMysqld(t *testing.T) {
	cs := connectstring(t)
	my := mysqlClient(t)
	sql(t, my, `CREATE DATABASE IF NOT EXISTS `+seqDatabase+`;
DROP TABLE IF EXISTS `+seqDatabase+`.sql_parts;
CREATE TABLE `+seqDatabase+`.sql_parts (
  id INT UNSIGNED AUTO_INCREMENT NOT NULL,
  part SMALLINT NOT NULL,
  content VARBINARY(100) NOT NULL,
  PRIMARY KEY (id, part)
) ENGINE=ndbcluster;
INSERT INTO `+seqDatabase+`.sql_parts (id, part, content) VALUES (500, 0, 'explicit');`)
	t.Cleanup(func() { sql(t, my, `DROP TABLE IF EXISTS `+seqDatabase+`.sql_parts`) })

	d := openDriver(t, cs, 1)
	tbl, err := d.Table(seqDatabase, "sql_parts")
	require.NoError(t, err)
	require.Len(t, tbl.Columns, 3)
	assert.True(t, tbl.Columns[0].AutoIncrement, "id is AUTO_INCREMENT")
	assert.False(t, tbl.Columns[1].AutoIncrement)
	assert.False(t, tbl.Columns[2].AutoIncrement)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := d.NextAutoIncrement(ctx, tbl)
	require.NoError(t, err)
	t.Logf("first value after SQL's explicit id 500: %d", first)
	assert.Greater(t, first, uint64(500), "mysqld's explicit insert moved the sequence past 500")
	second, err := d.NextAutoIncrement(ctx, tbl)
	require.NoError(t, err)
	assert.Greater(t, second, first)

	rows := sql(t, my, `INSERT INTO `+seqDatabase+`.sql_parts (part, content) VALUES (0, 'numbered by mysqld');
SELECT LAST_INSERT_ID();`)
	require.Len(t, rows, 1)
	byMysqld, err := strconv.ParseUint(rows[0][0], 10, 64)
	require.NoError(t, err)
	t.Logf("mysqld's next id: %d", byMysqld)
	assert.Greater(t, byMysqld, second, "mysqld numbers past the driver's values")
	third, err := d.NextAutoIncrement(ctx, tbl)
	require.NoError(t, err)
	assert.NotEqual(t, byMysqld, third)
	assert.Greater(t, third, second)

	// A copying ALTER makes a new table, with a new id and the sequence
	// carried over, under the old name: Temporary while the driver looks it
	// up again, then the new table's sequence.
	rows = sql(t, my, `ALTER TABLE `+seqDatabase+`.sql_parts ADD COLUMN note INT, ALGORITHM=COPY;
INSERT INTO `+seqDatabase+`.sql_parts (part, content) VALUES (0, 'after the ALTER');
SELECT LAST_INSERT_ID();`)
	require.Len(t, rows, 1)
	afterAlter, err := strconv.ParseUint(rows[0][0], 10, 64)
	require.NoError(t, err)
	deadline := time.Now().Add(15 * time.Second)
	var next uint64
	for {
		next, err = d.NextAutoIncrement(ctx, tbl)
		if err == nil {
			break
		}
		require.Equal(t, ndbclient.CodeTemporary, ndbclient.CodeOf(err), "after a copying ALTER: %v", err)
		require.True(t, time.Now().Before(deadline), "the altered table's sequence: %v", err)
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("mysqld's id after the ALTER: %d; the driver's next: %d", afterAlter, next)
	assert.Greater(t, next, afterAlter, "the new table's sequence")
}
