#!/usr/bin/env bash
# Installs (as root, from Debian's archive) the commands wgpio's tests run
# and do not find: iproute2, wireguard-tools, iperf3, ping, qemu, a static
# busybox for the kernel-WireGuard guest, and the rest listed below.
# scripts/test.sh runs it first; .ci/run runs it before the first step
# whose tests need them (the frame ownership check).
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin

# static_elf FILE: true if FILE is an ELF executable without a PT_INTERP
# program header (a statically linked one; the kernel-WireGuard tests copy
# /bin/busybox into a guest that has no libc). Reads the ELF64 little-endian
# header with od only.
static_elf() {
	local f=$1 magic phoff phentsize phnum i type
	[ -r "$f" ] || return 1
	magic=$(od -An -tx1 -N4 "$f" | tr -d ' \n')
	[ "$magic" = 7f454c46 ] || return 1
	phoff=$(od -An -tu8 -j32 -N8 "$f" | tr -d ' ')
	phentsize=$(od -An -tu2 -j54 -N2 "$f" | tr -d ' ')
	phnum=$(od -An -tu2 -j56 -N2 "$f" | tr -d ' ')
	for ((i = 0; i < phnum; i++)); do
		type=$(od -An -tu4 -j$((phoff + i * phentsize)) -N4 "$f" | tr -d ' ')
		[ "$type" = 3 ] && return 1 # PT_INTERP
	done
	return 0
}

# command:package pairs: each command the tests run, and the Debian package
# that provides it.
need=()
for t in ip:iproute2 wg:wireguard-tools iperf3:iperf3 ping:iputils-ping \
         qemu-system-x86_64:qemu-system-x86 cpio:cpio depmod:kmod modprobe:kmod \
         gzip:gzip tcpdump:tcpdump taskset:util-linux traceroute:traceroute \
         nft:nftables; do
	cmd=${t%%:*} pkg=${t##*:}
	command -v "$cmd" >/dev/null 2>&1 || need+=("$pkg")
done
if ! static_elf /bin/busybox; then
	# A dynamically linked busybox (pulled in by other packages) cannot
	# run in the guest: busybox-static replaces it.
	need+=(busybox-static)
fi
if [ ${#need[@]} -gt 0 ]; then
	mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
	if [ "$(id -u)" -ne 0 ]; then
		echo "install-test-deps.sh: missing packages ${need[*]}; run as root or: apt-get install ${need[*]}" >&2
		exit 1
	fi
	echo "install-test-deps.sh: installing ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
	if ! static_elf /bin/busybox; then
		echo "install-test-deps.sh: /bin/busybox is still not statically linked after installing busybox-static" >&2
		exit 1
	fi
fi

