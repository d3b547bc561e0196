#!/bin/sh
# Build vnetbench-flowgen (standard library only, Go >= 1.19) into DIR:
#     tools/flowgen/build.sh DIR        e.g. tools/flowgen/build.sh .venv/bin
set -eu
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
command -v go >/dev/null 2>&1 || {
    echo "$0: 'go' not found; install it with: apt-get install golang-go" >&2; exit 2; }
mkdir -p "$1"
out=$(cd "$1" && pwd)/vnetbench-flowgen
cd "$(dirname "$0")"
# No network (no third-party modules) and a build cache even without $HOME.
if [ -z "${GOCACHE:-}" ] && [ -z "${HOME:-}" ] && [ -z "${XDG_CACHE_HOME:-}" ]; then
    export GOCACHE=/tmp/vnetbench-go-cache
fi
GOPROXY=off GOTOOLCHAIN=local GOFLAGS= CGO_ENABLED=0 go build -trimpath -o "$out" .
echo "built $out"
