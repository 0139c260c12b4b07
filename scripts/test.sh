#!/usr/bin/env bash
# Runs wgpio's whole test suite on a fresh Debian machine of the project's
# kind: installs what the tests need (as root), then `go test ./...`.
# Tests create network namespaces, veth pairs and XDP programs, so they run
# as root. Extra arguments go to `go test` (e.g. -v, -run X, ./config).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin

./scripts/install-test-deps.sh

# Arguments go to `go test`; without a package pattern among them the whole
# module is tested (./scripts/test.sh -run Interop ./gateway/... tests one).
pkgs=./...
for a in "$@"; do
	case "$a" in ./*|github.com/*) pkgs= ;; esac
done
exec go test -count=1 -timeout 40m "$@" $pkgs
