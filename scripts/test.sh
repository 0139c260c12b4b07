#!/usr/bin/env bash
# Runs wgpio's whole test suite on a fresh Debian machine of the project's
# kind: installs what the tests need (as root), then `go test ./...`.
# Tests create network namespaces, veth pairs and XDP programs, so they run
# as root. Extra arguments go to `go test` (e.g. -v, -run X, ./config).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for t in ip:iproute2 ethtool:ethtool wg:wireguard-tools iperf3:iperf3 ping:iputils-ping \
         qemu-system-x86_64:qemu-system-x86 busybox:busybox-static cpio:cpio depmod:kmod tcpdump:tcpdump traceroute:traceroute; do
	cmd=${t%%:*} pkg=${t##*:}
	command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || [ -x "/sbin/$cmd" ] || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "test.sh: missing packages ${need[*]}; run as root or: apt-get install ${need[*]}" >&2
		exit 1
	fi
	echo "test.sh: installing ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Arguments go to `go test`; without a package pattern among them the whole
# module is tested (./scripts/test.sh -run Interop ./gateway/... tests one).
pkgs=./...
for a in "$@"; do
	case "$a" in ./*|github.com/*) pkgs= ;; esac
done
exec go test -count=1 -timeout 40m "$@" $pkgs
