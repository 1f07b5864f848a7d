//go:build ndbapi

package main

import (
	"log/slog"

	"github.com/ndbgate/ndbgate/config"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/ndbapi"
)

func driversBuilt() string { return "embedded, ndbapi" }

func openNDB(cfg config.Config, log *slog.Logger) (ndbclient.Driver, error) {
	d, err := ndbapi.Open(ndbapi.Config{Connectstring: cfg.NDB.Connectstring, PoolSize: cfg.NDB.PoolSize})
	if err != nil {
		return nil, err
	}
	log.Info("connected to NDB", slog.String("connectstring", cfg.NDB.Connectstring), slog.String("driver", d.String()))
	return d, nil
}
