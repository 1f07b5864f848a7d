// Command ndbgate is a NoSQL gateway for MySQL NDB Cluster and RonDB: memcached
// (and later REST and gRPC) requests become native NDB operations. With no
// cluster configured it serves from its embedded engine.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/ndbgate/ndbgate/config"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "version", "--version", "-v":
		fmt.Fprintf(stdout, "ndbgate %s (%s, %s/%s, drivers: %s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH, driversBuilt())
		return 0
	case "serve":
		cfg, err := config.Load("serve", args[1:], os.LookupEnv, stderr)
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if err != nil {
			fmt.Fprintf(stderr, "ndbgate: %v\n", err)
			return 2
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		if err := serve(ctx, cfg, newLogger(cfg.Log, stderr)); err != nil {
			fmt.Fprintf(stderr, "ndbgate: %v\n", err)
			return 1
		}
		return 0
	case "ndb-create-tables":
		rest, recreate := withoutFlag(args[1:], "--recreate")
		rest, itemState := withoutFlag(rest, "--item-state")
		rest, ndbmemcache := withoutFlag(rest, "--ndbmemcache-config")
		cfg, err := config.Load("ndb-create-tables", rest, os.LookupEnv, stderr)
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if err == nil && cfg.NDB.Connectstring == "" {
			err = errors.New("ndb-create-tables needs --ndb-connectstring (or ndb.connectstring)")
		}
		if err == nil {
			err = createNDBTables(cfg, tableOptions{recreate: recreate, itemState: itemState, ndbmemcache: ndbmemcache}, newLogger(cfg.Log, stderr), stdout)
		}
		if err != nil {
			fmt.Fprintf(stderr, "ndbgate: %v\n", err)
			return 1
		}
		return 0
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "ndbgate: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  ndbgate serve [--config FILE] [--memcache ADDR] [--rest ADDR] [--grpc ADDR]
                [--item-size-max N] [--memory-limit N] [--ndb-connectstring CS] ...
  ndbgate ndb-create-tables --ndb-connectstring CS [--config FILE] [--recreate]
                [--item-state] [--ndbmemcache-config]
                creates, through NdbDictionary, the tables the config needs
                that the cluster lacks (for clusters without a MySQL server;
                a mysqld does not see tables made this way); --recreate drops
                them first, so they start empty; --item-state gives the
                default container's demo_table an item_state column, where
                the meta protocol's item state (h, l, W/X/Z) is kept;
                --ndbmemcache-config also makes ndbmemcache's configuration
                tables and rows, and the demo_ext container's tables
                (demo_table_large, external_values), so that MySQL
                Cluster's own memcached (ndb_engine) can serve the same
                demo_table, and large values under "b:"
  ndbgate version

Run "ndbgate serve --help" for every flag.
`)
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// shutdownGrace bounds how long in-flight requests may take after a signal.
const shutdownGrace = 10 * time.Second

// withoutFlag returns args without every occurrence of flag, and whether it
// was there.
func withoutFlag(args []string, flag string) ([]string, bool) {
	var out []string
	found := false
	for _, a := range args {
		if a == flag {
			found = true
			continue
		}
		out = append(out, a)
	}
	return out, found
}
