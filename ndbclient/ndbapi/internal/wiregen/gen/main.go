// Command gen writes wiregen's files into the current directory
// (ndbclient/ndbapi, where its go:generate line runs it).
package main

import (
	"log"
	"os"

	"github.com/ndbgate/ndbgate/ndbclient/ndbapi/internal/wiregen"
)

func main() {
	for name, b := range wiregen.Files() {
		if err := os.WriteFile(name, b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
