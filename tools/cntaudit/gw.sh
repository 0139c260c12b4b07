#!/bin/bash
# gw.sh fastpath|compat: keys (first time), cnt0.conf and `wgpio up` in cntgw
CNT=${CNT:-/tmp/cnt} WGPIO=${WGPIO:-/tmp/cnt-wgpio}
mode=${1:-fastpath}
mkdir -p $CNT/$mode && cd $CNT && umask 077
for k in gw p1 p2 p3; do [ -f $k.key ] || { wg genkey > $k.key; wg pubkey < $k.key > $k.pub; }; done
cat > $CNT/$mode/cnt0.conf <<EOC
[Interface]
PrivateKey = $(cat gw.key)
ListenPort = 51820
Address = 198.19.220.1/24
MTU = 1420

[WGPIO]
Mode = $mode
WAN = cntw1
LAN = cntl1
Queues = 1
MetricsAddress = 127.0.0.1:9586

[Peer]
# stock wireguard-go in cntpeer (peer.sh)
PublicKey = $(cat p1.pub)
AllowedIPs = 198.19.220.2/32, 198.19.222.0/24, 2001:db8:222::/64
Endpoint = 198.18.221.2:51820

[Peer]
# no endpoint
PublicKey = $(cat p2.pub)
AllowedIPs = 198.19.223.0/24, 2001:db8:223::/64

[Peer]
# an endpoint that never answers
PublicKey = $(cat p3.pub)
AllowedIPs = 198.19.224.0/24, 2001:db8:224::/64
Endpoint = 198.18.221.2:51999
EOC
ip netns exec cntgw $WGPIO up -c $CNT/$mode/cnt0.conf >$CNT/gw-$mode.log 2>&1 &
echo $! > $CNT/gw.pid
