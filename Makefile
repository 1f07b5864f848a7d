# ndbgate — the two commands a new machine needs:
#   make run    build and serve on the embedded engine (memcache 127.0.0.1:11211)
#   make test   install test dependencies, then run every test
GO      ?= go
BIN     := bin/ndbgate
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
FUZZTIME ?= 20s

.PHONY: all build build-ndb check-ndb-shim shim-wire-test run test test-deps vet unit fuzz fuzz-long e2e deploy-test bench clean proto

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/ndbgate

# The NDB API driver: needs an NDB install (NDB_HOME with include/storage/ndb
# and lib/libndbclient). CI builds without it.
NDB_HOME ?= /usr
NDB_INCLUDE ?= $(NDB_HOME)/include/storage/ndb
NDB_CPPFLAGS = -I$(NDB_INCLUDE) -I$(NDB_INCLUDE)/ndbapi -I$(NDB_INCLUDE)/util -I$(NDB_INCLUDE)/portlib -I$(NDB_INCLUDE)/../..

build-ndb:
	CGO_ENABLED=1 CGO_CPPFLAGS="$(NDB_CPPFLAGS)" CGO_LDFLAGS="-L$(NDB_HOME)/lib -L$(NDB_HOME)/lib/mysql" \
	  $(GO) build -tags ndbapi -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/ndbgate

# Syntax-check the C++ shim and vet the cgo side against NDB headers only (no
# library needed): make check-ndb-shim NDB_INCLUDE=/path/to/storage/ndb/include
check-ndb-shim:
	g++ -std=c++17 -fsyntax-only -Wall -Wextra $(NDB_CPPFLAGS) ndbclient/ndbapi/shim*.cpp
	CGO_ENABLED=1 CGO_CPPFLAGS="$(NDB_CPPFLAGS)" $(GO) vet -tags ndbapi ./ndbclient/ndbapi/ ./cmd/ndbgate/

run: build
	./$(BIN) serve $(ARGS)

test: test-deps vet unit shim-wire-test fuzz e2e deploy-test

# The shim's request parser (ndbclient/ndbapi/shim_wire.h, plain C++) reads
# the golden flight Go's encoder wrote (wire_golden_test.go) field by field:
# g++ alone, no NDB.
shim-wire-test:
	@mkdir -p bin
	$(CXX) -std=c++17 -Wall -Wextra -Wshadow -Werror -o bin/shim_wire_test ndbclient/ndbapi/testdata/shim_wire_test.cpp
	./bin/shim_wire_test ndbclient/ndbapi/testdata/flight.golden | diff -u ndbclient/ndbapi/testdata/flight.golden.txt -

test-deps:
	./scripts/install-test-deps.sh

vet:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	cd tests/internal/harness && $(GO) vet ./...

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /tests/)

# A short run of every fuzz target; `make fuzz-long FUZZTIME=10m` for a real hunt.
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

fuzz-long:
	$(MAKE) fuzz FUZZTIME=$(FUZZTIME)

e2e:
	$(GO) test -count=1 -timeout 10m ./tests/...

# deploy/ checked by the tools users feed it (podman, podman kube play, helm,
# strict k8s.io/api, prometheus-operator and Grafana decoding, PromQL,
# promtool, a real Prometheus); tests/deploy is a module of its own.
deploy-test:
	cd tests/deploy && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./...

# Benchmarks (never part of test): memtier against memcached and twemproxy
# (WORKLOADS=all for the whole matrix), the front ends side by side, memory
# and start-up; each regenerates bench/RESULTS.md.
bench:
	./bench/run-memtier.sh
	./bench/api-compare.sh
	./bench/resources.sh

clean:
	rm -rf bin

# Regenerate the gRPC code from protocols/grpc/proto (the generated files are
# committed; the tests do not need protoc). Needs protoc: Debian's
# protobuf-compiler, installed here when missing and running as root.
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
proto:
	@command -v protoc >/dev/null 2>&1 || { [ "$$(id -u)" -eq 0 ] && apt-get update -qq && apt-get install -y -qq protobuf-compiler; } || { echo "make proto: install protoc (apt-get install protobuf-compiler)"; exit 2; }
	GOBIN=$(CURDIR)/bin/tools $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(CURDIR)/bin/tools $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	PATH=$(CURDIR)/bin/tools:$$PATH protoc -I protocols/grpc/proto \
	  --go_out=. --go_opt=module=github.com/ndbgate/ndbgate \
	  --go-grpc_out=. --go-grpc_opt=module=github.com/ndbgate/ndbgate \
	  protocols/grpc/proto/rdrs.proto protocols/grpc/proto/kv.proto
