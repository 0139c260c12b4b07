#!/bin/bash
# start stock wireguard-go in cntpeer
CNT=${CNT:-/tmp/cnt} WGPIO=${WGPIO:-/tmp/cnt-wgpio} WGGO=${WGGO:-/tmp/cnt-wggo} INJ=${INJ:-$CNT/inj}
ip netns exec cntpeer env WG_PROCESS_FOREGROUND=1 LOG_LEVEL=error $WGGO -f cntwg >$CNT/wggo.log 2>&1 &
echo $! > $CNT/wggo.pid
for i in $(seq 50); do [ -S /var/run/wireguard/cntwg.sock ] && break; sleep 0.1; done
ip netns exec cntpeer wg set cntwg private-key $CNT/p1.key listen-port 51820 peer $(cat $CNT/gw.pub) allowed-ips 198.19.0.0/16,2001:db8::/32 endpoint 198.18.221.1:51820
ip -n cntpeer addr add 198.19.222.1/24 dev cntwg
ip -n cntpeer addr add 2001:db8:222::1/64 dev cntwg nodad
ip -n cntpeer link set cntwg mtu 1420 up
ip -n cntpeer route add 198.19.220.0/24 dev cntwg 2>/dev/null || true
ip -n cntpeer route add 198.19.221.0/24 dev cntwg
ip -n cntpeer route add 198.19.99.0/24 dev cntwg
ip -n cntpeer route add 2001:db8:221::/64 dev cntwg
