#!/bin/bash
# stop.sh N: N valid LAN frames while the gateway is stopped (SIGSTOP), then SIGCONT
CNT=${CNT:-/tmp/cnt} WGPIO=${WGPIO:-/tmp/cnt-wgpio} WGGO=${WGGO:-/tmp/cnt-wggo} INJ=${INJ:-$CNT/inj}
n=$1
GWMAC_LAN=$(ip netns exec cntgw cat /sys/class/net/cntl1/address)
snap() { $WGPIO stats -json cnt0 > $CNT/s$1.json; ip netns exec cntgw curl -s 127.0.0.1:9586/metrics > $CNT/m$1.txt; }
snap 0
ip netns exec cntpeer $INJ count -if cntwg -dur 6s > $CNT/count.txt &
cpid=$!; sleep 0.3
kill -STOP $(cat $CNT/gw.pid)
ip netns exec cntlan $INJ send -if cntl0 -dst $GWMAC_LAN -kind valid4 -n $n >/dev/null
sleep 0.5
kill -CONT $(cat $CNT/gw.pid)
wait $cpid
sleep 1
snap 1
echo "== stopped gateway, lan valid4 N=$n: $(cat $CNT/count.txt)"
echo " stats:"; python3 $(dirname $0)/sdiff.py $CNT/s0.json $CNT/s1.json
echo " metrics:"; python3 $(dirname $0)/mdiff.py $CNT/m0.txt $CNT/m1.txt
