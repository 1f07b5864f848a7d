// The end-to-end suites' shared harness: a module of its own, with no
// dependencies, so that both ndbgate's module (tests/e2e) and tests/deploy's
// use it through a replace directive without joining their module graphs.
module github.com/ndbgate/ndbgate/tests/internal/harness

go 1.26.0
