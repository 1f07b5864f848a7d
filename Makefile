# ndbgate — the two commands a new machine needs:
#   make run    build and serve on the embedded engine (memcache 127.0.0.1:11211)
#   make test   install test dependencies, then run every test
GO      ?= go
BIN     := bin/ndbgate
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
FUZZTIME ?= 20s

.PHONY: all build run test test-deps vet unit fuzz fuzz-long e2e bench clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/ndbgate

run: build
	./$(BIN) serve $(ARGS)

test: test-deps vet unit fuzz e2e

test-deps:
	./scripts/install-test-deps.sh

vet:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /tests/)

# A short run of every fuzz target; `make fuzz-long FUZZTIME=10m` for a real hunt.
fuzz:
	@for pkg in $$($(GO) list ./... | grep -v /tests/); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$t ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

fuzz-long:
	$(MAKE) fuzz FUZZTIME=$(FUZZTIME)

e2e:
	$(GO) test -count=1 -timeout 10m ./tests/...

bench:
	./bench/memtier-compare.sh

clean:
	rm -rf bin
