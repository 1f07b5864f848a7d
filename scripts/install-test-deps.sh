#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine: libmemcached's
# conformance checker (memccapable), memcached (a reference peer for protocol
# tests), the Python clients (pymemcache, pylibmc, meta-memcache), Node's memjs
# (tests/node, from its lock file), podman, runc and catatonit (tests/deploy
# builds and runs the container image, and plays the chart's Pod), helm,
# Prometheus and promtool (pinned, built from their Go modules into bin/tools),
# and the Go dependencies of the repository and of tests/deploy (a module of
# its own). Idempotent and quiet when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-test-deps: not root and no sudo; install libmemcached-tools and memcached by hand" >&2
  fi
fi

need_apt=()
command -v memccapable >/dev/null 2>&1 || need_apt+=(libmemcached-tools)
command -v memcached >/dev/null 2>&1 || need_apt+=(memcached)
# tests/deploy: podman builds the image; runc runs it where crun cannot
# (crun refuses hybrid cgroup v1/v2 hosts, such as the build machines).
command -v podman >/dev/null 2>&1 || need_apt+=(podman)
command -v runc >/dev/null 2>&1 || need_apt+=(runc)
# podman kube play makes each Pod an infra container, whose init is catatonit
# (a podman recommendation, so not installed with --no-install-recommends).
command -v catatonit >/dev/null 2>&1 || need_apt+=(catatonit)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "install-test-deps: apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  # Debian starts memcached as a service on 11211, ndbgate's default port; the
  # tests use their own ports, but a user running `make run` needs 11211 free.
  if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl disable --now memcached >/dev/null 2>&1 || true; fi
  $SUDO pkill -x memcached >/dev/null 2>&1 || true
fi

if ! python3 -c 'import pymemcache, pytest, pylibmc, meta_memcache' >/dev/null 2>&1; then
  echo "install-test-deps: pip install -r tests/python/requirements.txt"
  python3 -m pip install -q --disable-pip-version-check -r tests/python/requirements.txt
fi

if [ ! -d tests/node/node_modules/memjs ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-test-deps: npm not found; install Node.js (the memjs tests need it)" >&2
    exit 1
  fi
  echo "install-test-deps: npm ci --prefix tests/node"
  npm ci --prefix tests/node --no-audit --no-fund --loglevel=error
fi

go mod download
(cd tests/deploy && go mod download)

# helm for tests/deploy (helm lint, helm template), an exact version.
HELM_VERSION=v3.22.0
if ! go version -m bin/tools/helm 2>/dev/null | grep -q "helm.sh/helm/v3[[:space:]]*$HELM_VERSION"; then
  echo "install-test-deps: go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION (into bin/tools)"
  GOBIN="$PWD/bin/tools" go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi

# Prometheus and promtool for tests/deploy, the exact version
# scripts/tools/prometheus/go.mod pins (its `tool` directives): built from
# source once, then kept in bin/tools while the pin holds. Not `go install
# pkg@version`: Prometheus's go.mod has a replace directive. remove_all_sd
# (Prometheus's own build tag) leaves out the cloud service discoveries, and
# most of the build time with them: the tests scrape static targets.
PROMETHEUS_VERSION=$(cd scripts/tools/prometheus && go list -m -f '{{.Version}}' github.com/prometheus/prometheus)
for t in prometheus promtool; do
  info=$(go version -m "bin/tools/$t" 2>/dev/null || true)
  if ! grep -Eq "^[[:space:]]*(mod|dep)[[:space:]]+github.com/prometheus/prometheus[[:space:]]+$PROMETHEUS_VERSION[[:space:]]" <<<"$info" ||
     ! grep -q -- "-tags=remove_all_sd" <<<"$info"; then
    echo "install-test-deps: go build prometheus and promtool $PROMETHEUS_VERSION (scripts/tools/prometheus, into bin/tools)"
    (cd scripts/tools/prometheus && go build -tags remove_all_sd -o ../../../bin/tools/ \
      github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool)
    break
  fi
done
