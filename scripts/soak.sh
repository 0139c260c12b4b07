#!/usr/bin/env bash
# soak.sh [MINUTES]: a long run of a wgpio gateway under churn, watched for
# leaks and unbounded growth. Not part of .ci/run or `go test ./...` (it
# lasts MINUTES, default 15). Run it as root from anywhere; it needs ip,
# wg, iperf3, ethtool, bpftool, curl and jq (Debian: iproute2,
# wireguard-tools, iperf3, ethtool, bpftool, curl, jq).
#
# What it builds (namespaces sk-*, addresses in 198.18.0.0/15 only, all
# removed on exit, also on failure or Ctrl-C):
#   sk-gw     wgpio up (fastpath, AddressMode shared, README "Running a
#             gateway"), WAN wan0 198.18.0.1, LAN lan0 198.19.0.1,
#             tunnel Address 198.19.100.1/24, /metrics on 127.0.0.1:9586
#   sk-wan    a bridge: the gateway's WAN, the peers, the flooder
#   sk-p1..3  stock wireguard-go peers (198.18.0.11-13, tunnel 198.19.100.11-13)
#   sk-lan    a bridge: the gateway's LAN and the hosts
#   sk-h1, 2  LAN hosts 198.19.0.11, .12
#   sk-fl     the handshake flooder (198.18.0.50, scripts/soakflood)
#
# What runs for MINUTES:
#   traffic   each peer against h1: iperf3 rounds of 20 s, UDP both ways
#             (--bidir, 1,000 packets/s each way) then TCP both ways (capped at
#             20 Mbit/s); h2 pings every peer
#   churn     every 3 s (plus the step's time) one step: dummy peers added and removed (wg set),
#             a peer's allowed IPs changed, wg syncconf of the file plus
#             dummies, a peer roaming (new listen port, new address), the
#             WAN or LAN MTU changed (1500/1400), the WAN or LAN link
#             down and up, a peer removed and added back under traffic,
#             packets held for a peer that never answers and the peer
#             removed while they wait
#   flood     from minute 2 for a third of the run: soakflood at 2,000
#             initiations/s (unknown keys, random bytes, the key of a fourth peer
#             configured for it alone)
#   watch     every 5 s (plus a sample's own time): wgpio stats and
#             /metrics (kept in OUT/metrics/), VmRSS, threads, open fds, go_goroutines, Go heap in use,
#             packets held, BPF map entries of the process's maps, the
#             routes in sk-gw, into OUT/samples.tsv
#
# At the end it prints the first and last samples and the largest value
# of each column; the UDP datagrams iperf3 sent and lost, also split into
# the rounds no disruptive churn step overlapped ("calm": what they lose
# no link down or roaming explains) and the others; the kernel's drops
# per namespace and the gateway's drop counters, to set those losses
# against; and exits non-zero if wgpio died. docs/soak.md has a run's
# figures. OUT is $SOAK_OUT or a new
# /tmp/wgpio-soak.XXXXXX; it keeps the logs (wgpio.log, iperf3 JSON).
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin
minutes=${1:-15}
cd "$(dirname "$0")/.."
out=${SOAK_OUT:-$(mktemp -d /tmp/wgpio-soak.XXXXXX)}
mkdir -p "$out/bin" "$out/metrics" "$out/iperf"
echo "soak: $minutes minutes, output in $out"

nss=(sk-gw sk-wan sk-lan sk-p1 sk-p2 sk-p3 sk-h1 sk-h2 sk-fl)
pids=() # every process started here, ended by PID on exit
gwpid=
# tree PID: PID and its descendants (the workers below are subshells).
tree() { local c; echo "$1"; for c in $(ps -o pid= --ppid "$1"); do tree "$c"; done; }
cleanup() {
	set +e
	local p all=()
	for p in "${pids[@]}"; do all+=($(tree "$p")); done
	kill "${all[@]}" 2>/dev/null
	[ -z "$gwpid" ] || kill "$gwpid" 2>/dev/null
	sleep 1
	kill -9 "${all[@]}" $gwpid 2>/dev/null
	for p in "${nss[@]}"; do ip netns del "$p" 2>/dev/null; done
	rm -f /var/run/wireguard/skgw.sock /var/run/wireguard/skwg[123].sock
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for n in "${nss[@]}"; do ip netns del "$n" 2>/dev/null || true; done

echo "soak: building wgpio, wireguard-go, soakflood"
go build -o "$out/bin/wgpio" ./cmd/wgpio
go build -o "$out/bin/wireguard-go" golang.zx2c4.com/wireguard
go build -o "$out/bin/soakflood" ./scripts/soakflood
wgpio=$out/bin/wgpio

nsx() { local n=$1; shift; ip netns exec "$n" "$@"; }
# veth NSA IFA NSB IFB [BRIDGE]: a veth pair, TX checksum offload off on
# both ends (veth would hand partial checksums to AF_XDP), IFB put in BRIDGE.
veth() {
	ip link add "$2" netns "$1" type veth peer name "$4" netns "$3"
	nsx "$1" ethtool -K "$2" tx off >/dev/null
	nsx "$3" ethtool -K "$4" tx off >/dev/null
	nsx "$1" ip link set "$2" up
	[ -z "${5:-}" ] || nsx "$3" ip link set "$4" master "$5"
	nsx "$3" ip link set "$4" up
}
for n in "${nss[@]}"; do ip netns add "$n"; nsx "$n" ip link set lo up; done
for n in sk-wan sk-lan; do nsx "$n" ip link add br0 type bridge; nsx "$n" ip link set br0 up; done
veth sk-gw wan0 sk-wan gw br0
veth sk-gw lan0 sk-lan gw br0
nsx sk-gw ip addr add 198.18.0.1/24 dev wan0
nsx sk-gw ip addr add 198.19.0.1/24 dev lan0
# As README asks of a gateway with Address: a removed peer's prefixes then
# reach the engine (no_route) rather than the kernel's IpInAddrErrors.
nsx sk-gw sysctl -qw net.ipv4.ip_forward=1
for i in 1 2 3; do
	veth sk-p$i eth0 sk-wan p$i br0
	nsx sk-p$i ip addr add 198.18.0.1$i/24 dev eth0
	nsx sk-p$i sysctl -qw net.ipv4.conf.eth0.promote_secondaries=1 # roaming below
done
veth sk-fl eth0 sk-wan fl br0
nsx sk-fl ip addr add 198.18.0.50/24 dev eth0
for i in 1 2; do
	veth sk-h$i eth0 sk-lan h$i br0
	nsx sk-h$i ip addr add 198.19.0.1$i/24 dev eth0
	nsx sk-h$i ip route add 198.19.0.0/16 via 198.19.0.1
done

key() { wg genkey; }
gwkey=$(key); gwpub=$(wg pubkey <<<"$gwkey")
declare -a pkey ppub
for i in 1 2 3 4; do pkey[i]=$(key); ppub[i]=$(wg pubkey <<<"${pkey[i]}"); done # 4: the flooder's
conf=$out/skgw.conf
{
	printf '[Interface]\nPrivateKey = %s\nListenPort = 51820\nAddress = 198.19.100.1/24\nMTU = 1420\n\n' "$gwkey"
	printf '[WGPIO]\nMode = fastpath\nWAN = wan0\nLAN = lan0\nAddressMode = shared\nQueues = 1\n'
	printf 'MetricsAddress = 127.0.0.1:9586\n'
	for i in 1 2 3 4; do
		printf '\n[Peer]\nPublicKey = %s\nAllowedIPs = 198.19.100.1%s/32\n' "${ppub[i]}" "$i"
	done
} >"$conf"
chmod 600 "$conf"
ip netns exec sk-gw "$wgpio" up -c "$conf" >"$out/wgpio.log" 2>&1 &
gwpid=$!
for _ in $(seq 100); do [ -S /var/run/wireguard/skgw.sock ] && break; sleep 0.2; done
[ -S /var/run/wireguard/skgw.sock ] || { cat "$out/wgpio.log"; exit 1; }

for i in 1 2 3; do
	ip netns exec sk-p$i env WG_PROCESS_FOREGROUND=1 "$out/bin/wireguard-go" skwg$i >"$out/wg-p$i.log" 2>&1 &
	pids+=($!)
done
sleep 1
for i in 1 2 3; do
	nsx sk-p$i wg set skwg$i private-key <(echo "${pkey[i]}") listen-port 5182$i \
		peer "$gwpub" endpoint 198.18.0.1:51820 allowed-ips 198.19.0.0/16 persistent-keepalive 25
	nsx sk-p$i ip addr add 198.19.100.1$i/24 dev skwg$i
	nsx sk-p$i ip link set skwg$i mtu 1420 up
	nsx sk-p$i ip route add 198.19.0.0/24 dev skwg$i
done

# Traffic: iperf3 servers on h1 (one port per peer) and on every peer.
for i in 1 2 3; do
	ip netns exec sk-h1 iperf3 -s -p 520$i >/dev/null 2>&1 & pids+=($!)
done
sleep 1
traffic() { # traffic PEER: iperf3 rounds until the end
	local i=$1 n=0
	while [ "$SECONDS" -lt "$stop" ]; do
		n=$((n + 1))
		timeout 40 ip netns exec sk-p$i iperf3 -c 198.19.0.11 -p 520$i -u --bidir -b 4M -l 500 -t 20 \
			-J >"$out/iperf/udp-p$i-$n.json" 2>&1 || true
		timeout 40 ip netns exec sk-p$i iperf3 -c 198.19.0.11 -p 520$i --bidir -b 20M -t 20 \
			-J >"$out/iperf/tcp-p$i-$n.json" 2>&1 || true
		sleep 1
	done
}
stop=$((SECONDS + minutes * 60))
waitfor=()
for i in 1 2 3; do traffic "$i" & pids+=($!); waitfor+=($!); done
for i in 1 2 3; do
	ip netns exec sk-h2 ping -q -i 0.2 -w $((minutes * 60)) 198.19.100.1$i >"$out/ping-p$i.log" 2>&1 & pids+=($!)
done

# Churn: one step every 3 s.
dummies=()
churn() {
	local step=0 i k addr port ep
	set +e
	while [ "$SECONDS" -lt "$stop" ]; do
		step=$((step + 1))
		i=$((step % 3 + 1))
		echo "step $step at $(date +%s)"
		# a dummy peer added; the oldest removed past 20
		k=$(key | wg pubkey)
		dummies+=("$k")
		wg set skgw peer "$k" allowed-ips "198.19.$((200 + step % 8)).$((step % 250 + 1))/32"
		if [ ${#dummies[@]} -gt 20 ]; then
			wg set skgw peer "${dummies[0]}" remove
			dummies=("${dummies[@]:1}")
		fi
		# a peer's allowed IPs changed, every other step back
		if [ $((step % 2)) -eq 0 ]; then
			wg set skgw peer "${ppub[i]}" allowed-ips "198.19.100.1$i/32,198.19.15$i.0/24"
		else
			wg set skgw peer "${ppub[i]}" allowed-ips "198.19.100.1$i/32"
		fi
		case $((step % 10)) in
		1) # wg syncconf: the file plus the dummies (endpoints kept)
			{ "$wgpio" strip "$conf"; for k in "${dummies[@]:0:10}"; do
				printf '\n[Peer]\nPublicKey = %s\nAllowedIPs = 198.19.220.%d/32\n' "$k" $((RANDOM % 250 + 1)); done
			} >"$out/sync.conf"
			wg syncconf skgw "$out/sync.conf"
			dummies=("${dummies[@]:0:10}") ;;
		2) # roaming: a new source port
			port=$((40000 + RANDOM % 20000))
			nsx sk-p$i wg set skwg$i listen-port "$port" ;;
		3) # roaming: a new source address
			addr=$(nsx sk-p$i ip -4 -o addr show dev eth0 | awk '{print $4; exit}')
			if [ "$addr" = "198.18.0.1$i/24" ]; then new=198.18.0.4$i/24; else new=198.18.0.1$i/24; fi
			nsx sk-p$i ip addr add "$new" dev eth0
			nsx sk-p$i ip addr del "$addr" dev eth0 ;;
		4) # the WAN or the LAN MTU changed
			dev=$([ $((step % 20)) -lt 10 ] && echo wan0 || echo lan0)
			mtu=$(nsx sk-gw cat /sys/class/net/$dev/mtu)
			nsx sk-gw ip link set "$dev" mtu $([ "$mtu" = 1500 ] && echo 1400 || echo 1500) ;;
		5) # the WAN or the LAN link down for 2 s
			dev=$([ $((step % 20)) -lt 10 ] && echo wan0 || echo lan0)
			nsx sk-gw ip link set "$dev" down; sleep 2; nsx sk-gw ip link set "$dev" up ;;
		6) # a peer removed under traffic and added back
			ep=$(wg show skgw endpoints | awk -v k="${ppub[i]}" '$1 == k {print $2}')
			wg set skgw peer "${ppub[i]}" remove; sleep 1
			wg set skgw peer "${ppub[i]}" allowed-ips "198.19.100.1$i/32" \
				$([ "$ep" = "(none)" ] || [ -z "$ep" ] || echo endpoint "$ep") ;;
		7) # packets held for a peer that never answers, then it is removed
			k=$(key | wg pubkey)
			wg set skgw peer "$k" endpoint 198.18.0.99:51820 allowed-ips 198.19.210.0/24
			nsx sk-h2 ping -q -c 40 -i 0.05 198.19.210.1 >/dev/null 2>&1 || true
			wg set skgw peer "$k" remove ;;
		esac
		sleep 3
	done
}
churn >"$out/churn.log" 2>&1 & pids+=($!); waitfor+=($!)

flood() {
	sleep 120
	nsx sk-fl "$out/bin/soakflood" -to 198.18.0.1:51820 -pub "$gwpub" -known "${pkey[4]}" \
		-rate 2000 -duration $((minutes * 20))s
}
flood >"$out/flood.log" 2>&1 & pids+=($!); waitfor+=($!)

# Watch: a sample every 5 s.
metric() { awk -v m="$1" '{n = $1; sub(/[{].*/, "", n)} n == m {s += $2} END {printf "%d", s}' "$2"; }
bpf_entries() { # the entries of every BPF map the process holds
	local id n=0
	for id in $(awk '/^map_id:/ {print $2}' /proc/$gwpid/fdinfo/* 2>/dev/null | sort -un); do
		n=$((n + $(bpftool map dump id "$id" -j 2>/dev/null | jq 'length')))
	done
	echo "$n"
}
printf 'sec\trss_kB\tthreads\tfds\tgoroutines\theap_inuse_kB\theld\tpeers\tbpf_entries\troutes4\troutes6\tstats_ok\n' >"$out/samples.tsv"
while [ "$SECONDS" -lt "$stop" ] && kill -0 "$gwpid" 2>/dev/null; do
	m=$out/metrics/$SECONDS.txt
	nsx sk-gw curl -sf --max-time 4 http://127.0.0.1:9586/metrics >"$m" || true
	ok=1; nsx sk-gw "$wgpio" stats skgw >"$out/stats.txt" 2>&1 || ok=0
	printf '%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n' "$SECONDS" \
		"$(awk '/^VmRSS/ {print $2}' /proc/$gwpid/status)" "$(ls /proc/$gwpid/task | wc -l)" \
		"$(ls /proc/$gwpid/fd | wc -l)" "$(metric go_goroutines "$m")" \
		$(($(metric go_memstats_heap_inuse_bytes "$m") / 1024)) "$(metric wgpio_packets_held "$m")" \
		"$(metric wgpio_peers "$m")" "$(bpf_entries)" \
		"$(nsx sk-gw ip -4 route show table all | wc -l)" "$(nsx sk-gw ip -6 route show table all | wc -l)" \
		"$ok" >>"$out/samples.tsv"
	sleep 5
done
wait "${waitfor[@]}" 2>/dev/null || true

alive=1; kill -0 "$gwpid" 2>/dev/null || alive=0
nsx sk-gw ip route show table all >"$out/routes-end.txt"
nsx sk-gw wg show skgw >"$out/wg-end.txt" 2>&1 || true
echo "== samples (first, last, largest)"
column -t "$out/samples.tsv" | sed -n '1,2p;$p'
awk -F'\t' 'NR > 1 {for (i = 1; i <= NF; i++) if ($i > max[i]) max[i] = $i}
	END {printf "max"; for (i = 2; i <= NF; i++) printf "\t%s", max[i]; print ""}' "$out/samples.tsv"
echo "== UDP datagrams (iperf3, both ways) against the gateway's drops"
jq -s '[.[] | .end.streams[]?.udp | select(.) | {p: .packets, l: .lost_packets}]
	| {sent: (map(.p) | add), lost: (map(.l) | add)}' "$out"/iperf/udp-*.json 2>/dev/null || true
# The UDP rounds during which no step 2-6 of the churn (roaming, MTU,
# link down, peer removed) ran: what they lost is what to explain by the
# counters alone.
awk '/^step/ && $2 % 10 >= 2 && $2 % 10 <= 6 {print $4}' "$out/churn.log" >"$out/disruptions.txt"
for f in "$out"/iperf/udp-*.json; do
	jq -r '[.start.timestamp.timesecs, ([.end.streams[]?.udp.packets] | add), ([.end.streams[]?.udp.lost_packets] | add)] | @tsv' "$f" 2>/dev/null
done | awk 'NR == FNR {t[NR] = $1; n = NR; next}
	{calm = 1; for (i = 1; i <= n; i++) if (t[i] >= $1 - 2 && t[i] <= $1 + 25) calm = 0
	 k = calm ? "calm" : "disrupted"; runs[k]++; sent[k] += $2; lost[k] += $3}
	END {for (k in runs) printf "%s rounds: %d, datagrams %d, lost %d\n", k, runs[k], sent[k], lost[k]}' \
	"$out/disruptions.txt" - || true
echo "== kernel drops per namespace (IP and UDP errors and discards; the links' rx and tx dropped)"
for n in "${nss[@]}"; do
	printf '%s\t%s link_drops=%s\n' "$n" "$(nsx "$n" awk '/^(Ip|Udp):/ {
		if (!seen[$1]++) {for (i = 2; i <= NF; i++) h[$1, i] = $i; next}
		for (i = 2; i <= NF; i++) if (h[$1, i] ~ /Err|Discard|NoRoute|Fail/ && $i > 0) printf "%s%s=%s ", $1, h[$1, i], $i}' /proc/net/snmp)" \
		"$(nsx "$n" ip -s -j link | jq '[.[].stats64 | .rx.dropped + .tx.dropped] | add')"
done
last=$(ls -v "$out"/metrics/*.txt | tail -1)
grep -E '^wgpio_(drops_total|port_drops_total|control_drops_total)' "$last" | awk '$2 > 0' || true
cat "$out/flood.log"
if [ "$alive" = 0 ]; then echo "soak: wgpio died; its log:"; tail -50 "$out/wgpio.log"; exit 1; fi
echo "soak: wgpio alive after $minutes minutes"
