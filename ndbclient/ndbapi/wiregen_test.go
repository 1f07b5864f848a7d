package ndbapi

import (
	"bytes"
	"os"
	"testing"

	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/ndbapi/internal/wiregen"
)

// The wire's numbers are generated for both sides from one table; a file
// edited by hand, or a table changed without go generate, fails here.
func TestWireConstsGenerated(t *testing.T) {
	for name, want := range wiregen.Files() {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%s: %v (run go generate ./ndbclient/ndbapi)", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./ndbclient/ndbapi", name)
		}
	}
}

// encodeFlight sends an op's lock mode as ndbclient's number: the table's
// lock codes must be those numbers.
func TestWireLockCodes(t *testing.T) {
	if ndbclient.LockCommitted != lockCommitted || ndbclient.LockShared != lockShared || ndbclient.LockExclusive != lockExclusive ||
		ndbclient.LockSimple != lockSimple {
		t.Fatal("ndbclient.LockMode's values differ from the wire's lock codes (internal/wiregen)")
	}
}
