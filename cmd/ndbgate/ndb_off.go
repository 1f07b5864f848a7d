//go:build !ndbapi

package main

import (
	"errors"
	"io"
	"log/slog"

	"github.com/ndbgate/ndbgate/config"
	"github.com/ndbgate/ndbgate/ndbclient"
)

func driversBuilt() string { return "embedded" }

func openNDB(config.Config, *slog.Logger) (ndbclient.Driver, error) {
	return nil, errors.New("this ndbgate binary has no NDB support, so --ndb-connectstring cannot be used; " +
		"build one with `make build-ndb` (needs an NDB install: NDB_HOME or pkg-config for ndbclient), " +
		"or drop --ndb-connectstring to run on the embedded engine")
}

func createNDBTables(config.Config, tableOptions, *slog.Logger, io.Writer) error {
	return errors.New("this ndbgate binary has no NDB support: build one with `make build-ndb`")
}
