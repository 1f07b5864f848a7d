//go:build ndbapi

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/ndbgate/ndbgate/config"
	"github.com/ndbgate/ndbgate/internal/ndbmemcache"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/ndbapi"
)

func driversBuilt() string { return "embedded, ndbapi" }

func openNDB(cfg config.Config, log *slog.Logger) (ndbclient.Driver, error) {
	d, err := ndbapi.Open(ndbapi.Config{Connectstring: cfg.NDB.Connectstring, PoolSize: cfg.NDB.PoolSize,
		BusyPoll: cfg.NDB.BusyPollLimit(), FlightWait: time.Duration(cfg.NDB.FlightWait), Log: log})
	if err != nil {
		return nil, err
	}
	log.Info("connected to NDB", slog.String("connectstring", cfg.NDB.Connectstring), slog.String("driver", d.String()),
		slog.Duration("busy_poll", cfg.NDB.BusyPollLimit()), slog.Duration("flight_wait", time.Duration(cfg.NDB.FlightWait)))
	return d, nil
}

// createNDBTables creates, through NdbDictionary, each table the config needs
// that the cluster lacks: for clusters without a MySQL server.
func createNDBTables(cfg config.Config, opts tableOptions, log *slog.Logger, stdout io.Writer) error {
	tables, err := tablesToCreate(cfg, opts.itemState)
	if err != nil {
		return err
	}
	d, err := ndbapi.Open(ndbapi.Config{Connectstring: cfg.NDB.Connectstring, PoolSize: 1, Log: log})
	if err != nil {
		return err
	}
	defer d.Close()
	var config []*ndbclient.Table
	if opts.ndbmemcache {
		config = ndbmemcache.Tables()
		tables = append(append(tables, ndbmemcache.DemoDataTables()...), config...)
	}
	for _, t := range tables {
		if opts.recreate {
			if _, err := d.DropNDBTable(t.Database, t.Name); err != nil {
				return err
			}
		}
		created, err := d.CreateNDBTable(t)
		if err != nil {
			return err
		}
		state := "exists"
		if created {
			state = "created"
		}
		fmt.Fprintf(stdout, "%s %s\n", t.FullName(), state)
	}
	if len(config) == 0 {
		return nil
	}
	rows := ndbmemcache.DemoRows(cfg.NDB.Connectstring)
	for _, want := range config {
		t, err := d.Table(want.Database, want.Name)
		if err != nil {
			return err
		}
		b := &ndbclient.Batch{}
		for _, row := range rows[want.Name] {
			b.Ops = append(b.Ops, ndbmemcache.RowOp(t, row))
		}
		if len(b.Ops) == 0 {
			continue
		}
		if err := d.Execute(context.Background(), b); err != nil {
			return err
		}
		for _, op := range b.Ops {
			if op.Err != nil {
				return fmt.Errorf("%s: %w", t.FullName(), op.Err)
			}
		}
		fmt.Fprintf(stdout, "%s: %d rows\n", t.FullName(), len(b.Ops))
	}
	return nil
}
