#!/bin/bash
# run.sh lan|tun KIND N [inj send flags...]: inject N frames of KIND, print delivered and counter deltas
CNT=${CNT:-/tmp/cnt} WGPIO=${WGPIO:-/tmp/cnt-wgpio} WGGO=${WGGO:-/tmp/cnt-wggo} INJ=${INJ:-$CNT/inj}
side=$1; kind=$2; n=$3; shift 3
GW=${GW:-cnt0}
GWMAC_LAN=$(ip netns exec cntgw cat /sys/class/net/cntl1/address)
snap() { $WGPIO stats -json $GW > $CNT/s$1.json; ip netns exec cntgw curl -s 127.0.0.1:9586/metrics > $CNT/m$1.txt; }
snap 0
if [ $side = lan ]; then
  ip netns exec cntpeer $INJ count -if cntwg -dur ${DUR:-3s} > $CNT/count.txt &
  cpid=$!; sleep 0.3
  ip netns exec cntlan $INJ send -if cntl0 -dst $GWMAC_LAN -kind $kind -n $n "$@" >/dev/null
else
  ip netns exec cntlan $INJ count -if cntl0 -dur ${DUR:-3s} > $CNT/count.txt &
  cpid=$!; sleep 0.3
  ip netns exec cntpeer $INJ send -if cntwg -kind $kind -n $n -src4 198.19.222.1 -dst4 198.19.221.10 -src6 2001:db8:222::1 -dst6 2001:db8:221::10 "$@" >/dev/null
fi
wait $cpid
sleep ${SETTLE:-0.2}
snap 1
echo "== $side $kind N=$n: $(cat $CNT/count.txt)"
echo " stats:"; python3 $(dirname $0)/sdiff.py $CNT/s0.json $CNT/s1.json
echo " metrics:"; python3 $(dirname $0)/mdiff.py $CNT/m0.txt $CNT/m1.txt
