#!/bin/bash
# cnt audit topology: cntlan (LAN host) -- cntgw (wgpio) -- cntpeer (stock wireguard-go)
CNT=${CNT:-/tmp/cnt} WGPIO=${WGPIO:-/tmp/cnt-wgpio} WGGO=${WGGO:-/tmp/cnt-wggo} INJ=${INJ:-$CNT/inj}
set -e
down() {
  for n in cntlan cntgw cntpeer; do ip netns del $n 2>/dev/null || true; done
}
if [ "$1" = down ]; then down; exit 0; fi
down
for n in cntlan cntgw cntpeer; do ip netns add $n; ip -n $n link set lo up; done
ip link add cntl0 netns cntlan type veth peer name cntl1 netns cntgw
ip link add cntw0 netns cntpeer type veth peer name cntw1 netns cntgw
ip -n cntlan addr add 198.19.221.10/24 dev cntl0
ip -n cntlan addr add 2001:db8:221::10/64 dev cntl0 nodad
ip -n cntgw addr add 198.19.221.1/24 dev cntl1
ip -n cntgw addr add 2001:db8:221::1/64 dev cntl1 nodad
ip -n cntgw addr add 198.18.221.1/24 dev cntw1
ip -n cntpeer addr add 198.18.221.2/24 dev cntw0
for x in "cntlan cntl0" "cntgw cntl1" "cntgw cntw1" "cntpeer cntw0"; do set -- $x; ip -n $1 link set $2 up; ip netns exec $1 ethtool -K $2 tx off >/dev/null 2>&1 || true; done
ip -n cntlan route add 198.19.0.0/16 via 198.19.221.1
ip -n cntlan route add 2001:db8::/32 via 2001:db8:221::1
ip netns exec cntgw sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
