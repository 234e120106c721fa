#!/usr/bin/env bash
# Installs the pinned helm, built from its Go module, where the deploy tests look for it:
#   ${KOP_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/kafka-offset-proxy}/helm-<version>/helm
# (test/harness/deploy.ts reads HELM_VERSION from this file). Needs Go 1.21 or newer; helm
# v3.22.0's go.mod asks for Go 1.26, and an older local Go builds it with the go1.27.3 toolchain,
# which Go fetches from the module proxy. Does nothing when that helm is already there.
set -euo pipefail

HELM_VERSION=v3.22.0
HELM_MIN_GO=1.26
FALLBACK_TOOLCHAIN=go1.27.3

cache="${KOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kafka-offset-proxy}"
bindir="$cache/helm-$HELM_VERSION"
if [ -x "$bindir/helm" ]; then
  echo "helm $HELM_VERSION: $bindir/helm"
  exit 0
fi

if ! command -v go > /dev/null; then
  echo "install-helm: no go on PATH; helm $HELM_VERSION is built from its Go module (Go 1.21+ needed)" >&2
  exit 1
fi
local_go="$(go env GOVERSION)" # e.g. go1.26.8
older_than() { # older_than go1.2x.y 1.26 -> true when the first is older
  [ "$(printf '%s\n%s\n' "${1#go}" "$2" | sort -V | head -n 1)" != "$2" ]
}
if older_than "$local_go" "$HELM_MIN_GO"; then
  export GOTOOLCHAIN="$FALLBACK_TOOLCHAIN"
  echo "install-helm: $local_go is older than go$HELM_MIN_GO: building with $GOTOOLCHAIN"
fi

mkdir -p "$bindir"
# A temporary GOBIN first: a build that stops half way leaves no helm behind that counts as installed.
tmp="$(mktemp -d "$cache/helm-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
GOBIN="$tmp" GOFLAGS=-buildvcs=false go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
mv "$tmp/helm" "$bindir/helm"
echo "helm $HELM_VERSION: $bindir/helm"
