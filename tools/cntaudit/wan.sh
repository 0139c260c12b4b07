#!/bin/bash
# wan.sh KIND N [flags]: outer frames to the gateway's WAN from cntpeer
CNT=${CNT:-/tmp/cnt} WGPIO=${WGPIO:-/tmp/cnt-wgpio} WGGO=${WGGO:-/tmp/cnt-wggo} INJ=${INJ:-$CNT/inj}
kind=$1; n=$2; shift 2
GW=${GW:-cnt0}
export CNT_GWMAC=$(ip netns exec cntgw cat /sys/class/net/cntw1/address) CNT_GWPUB=$(cat $CNT/gw.pub)
snap() { $WGPIO stats -json $GW > $CNT/s$1.json; ip netns exec cntgw curl -s 127.0.0.1:9586/metrics > $CNT/m$1.txt; }
snap 0
ip netns exec cntpeer $INJ wan -if cntw0 -capif cntw0 -kind $kind -n $n "$@" > $CNT/wan.txt &
wpid=$!
case $kind in garbage|short|type9|init-*) ;; *) sleep 0.3; ip netns exec cntpeer ping -c1 -W1 198.19.221.10 >/dev/null ;; esac
wait $wpid
sleep ${SETTLE:-0.5}
snap 1
echo "== wan $kind N=$n: $(cat $CNT/wan.txt)"
echo " stats:"; python3 $(dirname $0)/sdiff.py $CNT/s0.json $CNT/s1.json
echo " metrics:"; python3 $(dirname $0)/mdiff.py $CNT/m0.txt $CNT/m1.txt
