#!/usr/bin/env bash
# Builds the default ndbgate image (deploy/image/Dockerfile): a static
# ndbgate (CGO off, embedded engine) on an empty base, user 65532.
#
#   deploy/image/build.sh [TAG]        # default TAG: localhost/ndbgate:latest
#
# Environment: IMAGE_TOOL (podman, or docker), GO (go), VERSION (git describe),
# GOARCH (the host's; the image is built for it). Nothing is pulled: the binary
# is compiled here and copied into a FROM scratch image.
set -euo pipefail
cd "$(dirname "$0")/../.."

TAG=${1:-localhost/ndbgate:latest}
TOOL=${IMAGE_TOOL:-podman}
GO=${GO:-go}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/etc" "$ctx/rootfs/run" "$ctx/run/ndbgate"

CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w -X main.version=$VERSION" \
  -o "$ctx/rootfs/usr/local/bin/ndbgate" ./cmd/ndbgate

# A user and group for the numeric USER, so tools that print names show one.
printf 'root:x:0:0:root:/:/sbin/nologin\nndbgate:x:65532:65532:ndbgate:/:/sbin/nologin\n' >"$ctx/rootfs/etc/passwd"
printf 'root:x:0:\nndbgate:x:65532:\n' >"$ctx/rootfs/etc/group"
# run/ndbgate: the socket directory, given to 65532 by the Dockerfile.
chmod 0755 "$ctx/rootfs" "$ctx/rootfs/usr" "$ctx/rootfs/usr/local" "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/etc" "$ctx/rootfs/run" "$ctx/run"
chmod 0755 "$ctx/rootfs/usr/local/bin/ndbgate"
chmod 0644 "$ctx/rootfs/etc/passwd" "$ctx/rootfs/etc/group"
cp deploy/image/Dockerfile "$ctx/Dockerfile"

"$TOOL" build --build-arg "VERSION=$VERSION" -t "$TAG" "$ctx"
