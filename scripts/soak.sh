#!/usr/bin/env bash
# soak.sh [MINUTES]: a long run of a wgpio gateway under churn, watched for
# leaks and unbounded growth. Not part of .ci/run or `go test ./...` (it
# lasts MINUTES, default 15). Run it as root from anywhere; it needs ip,
# wg, iperf3, ethtool, bpftool, curl and jq (Debian: iproute2,
# wireguard-tools, iperf3, ethtool, bpftool, curl, jq).
#
# What it builds (namespaces sk-* (SOAK_PREFIX-*), addresses in
# 198.18.0.0/15 and, with the IPv6 options, 2001:2::/48 (benchmarking,
# RFC 5180) and 2001:db8::/32 (documentation) only, all removed on exit,
# also on failure or Ctrl-C):
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
#             20 Mbit/s); h2 pings every peer (again after each error)
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
# Options (environment; unset, the run is the one above):
#   SOAK_MODE=compat|compat-mqtun   the gateway's Mode (default fastpath)
#   SOAK_QUEUES=N      Queues = N, and N queues on every veth (default 1)
#   SOAK_WAN6=1        the peers' endpoints over IPv6: wan0 has 2001:2::1/64
#                      beside 198.18.0.1, the peers 2001:2::11-13 only (a
#                      roam moves to 2001:2::41-43), the flooder 2001:2::50
#   SOAK_INNER6=1      IPv6 in the tunnel too: lan0 2001:db8:10::1/64, the
#                      hosts ::11, ::12 of it, Address adds 2001:db8:100::1/64,
#                      the peers 2001:db8:100::11-13; iperf3 and ping over IPv6
#                      (the IPv4 addresses stay); dummies and the allowed-IPs
#                      step add IPv6 prefixes
#   SOAK_STEPS="2 5"   run only these kinds of the tenth steps (step % 10:
#                      1 syncconf, 2 port roam, 3 address roam, 4 MTU,
#                      5 link down, 6 peer removed, 7 held packets);
#                      default all
#   SOAK_ACCOUNT=1     UDP rounds only (no TCP, pings or flood), so that the
#                      counters below count the iperf3 datagrams and little else
#   SOAK_PREFIX=sk6    the namespaces' prefix and the interfaces' (sk6gw ...)
#
# At the end it prints the first and last samples and the largest value
# of each column; the UDP datagrams iperf3 sent and lost, also split into
# the rounds no disruptive churn step overlapped ("calm": what they lose
# no link down or roaming explains) and the others; the kernel's drops
# per namespace (IPv4 with IpExt, IPv6) and the gateway's drop counters,
# to set those losses against; the frames each test bridge took in for a
# host's MAC address and did not hand to that host's port (nftables bridge
# counters: a port down, its MAC forgotten and the frame flooded
# elsewhere) and those a port's link delivered that the bridge dropped on
# arrival (a port not forwarding yet); the gateway's frame balance from
# those books; per peer the frames of its eth0 and its TUN; the
# gateway's exception TUN; wg show against the peers' own view over 5 s
# of UDP after the churn; and exits non-zero if wgpio died. docs/soak.md
# has the runs' figures. OUT is $SOAK_OUT or a new
# /tmp/wgpio-soak.XXXXXX; it keeps the logs (wgpio.log, iperf3 JSON).
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin
minutes=${1:-15}
P=${SOAK_PREFIX:-sk}
mode=${SOAK_MODE:-fastpath}
queues=${SOAK_QUEUES:-1}
wan6=${SOAK_WAN6:-0}
inner6=${SOAK_INNER6:-0}
steps=${SOAK_STEPS:-0 1 2 3 4 5 6 7 8 9}
account=${SOAK_ACCOUNT:-0}
case $mode in fastpath | compat | compat-mqtun) ;; *) echo "soak: SOAK_MODE=$mode: want fastpath, compat or compat-mqtun" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
out=${SOAK_OUT:-$(mktemp -d /tmp/wgpio-soak.XXXXXX)}
mkdir -p "$out/bin" "$out/metrics" "$out/iperf"
echo "soak: $minutes minutes, mode $mode, $queues queues, wan6=$wan6 inner6=$inner6 steps='$steps' account=$account, output in $out"

nss=($P-gw $P-wan $P-lan $P-p1 $P-p2 $P-p3 $P-h1 $P-h2 $P-fl)
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
	rm -f /var/run/wireguard/${P}gw.sock /var/run/wireguard/${P}wg[123].sock
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
# veth NSA IFA NSB IFB [BRIDGE]: a veth pair of $queues queues each way, TX
# checksum offload off on both ends (veth would hand partial checksums to
# AF_XDP), IFB put in BRIDGE.
veth() {
	ip link add "$2" netns "$1" numtxqueues "$queues" numrxqueues "$queues" type veth \
		peer name "$4" netns "$3" numtxqueues "$queues" numrxqueues "$queues"
	nsx "$1" ethtool -K "$2" tx off >/dev/null
	nsx "$3" ethtool -K "$4" tx off >/dev/null
	nsx "$1" ip link set "$2" up
	[ -z "${5:-}" ] || nsx "$3" ip link set "$4" master "$5"
	nsx "$3" ip link set "$4" up
}
# IPv6 addresses without duplicate address detection (no tentative seconds).
for n in "${nss[@]}"; do
	ip netns add "$n"; nsx "$n" ip link set lo up
	nsx "$n" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
done
for n in $P-wan $P-lan; do nsx "$n" ip link add br0 type bridge; nsx "$n" ip link set br0 up; done
veth $P-gw wan0 $P-wan gw br0
veth $P-gw lan0 $P-lan gw br0
nsx $P-gw ip addr add 198.18.0.1/24 dev wan0
nsx $P-gw ip addr add 198.19.0.1/24 dev lan0
[ "$wan6" = 0 ] || nsx $P-gw ip addr add 2001:2::1/64 dev wan0 nodad
[ "$inner6" = 0 ] || nsx $P-gw ip addr add 2001:db8:10::1/64 dev lan0 nodad
# As README asks of a gateway with Address: a removed peer's prefixes then
# reach the engine (no_route) rather than the kernel's IpInAddrErrors
# (compat-mqtun refuses to start without it).
nsx $P-gw sysctl -qw net.ipv4.ip_forward=1
[ "$inner6" = 0 ] || nsx $P-gw sysctl -qw net.ipv6.conf.all.forwarding=1
# Linux deletes a link's IPv6 addresses when it goes down; the link-down
# step below keeps them, as an administrator's network configuration would
# put them back.
[ "$wan6$inner6" = 00 ] || nsx $P-gw sysctl -qw net.ipv6.conf.all.keep_addr_on_down=1 \
	net.ipv6.conf.wan0.keep_addr_on_down=1 net.ipv6.conf.lan0.keep_addr_on_down=1
for i in 1 2 3; do
	veth $P-p$i eth0 $P-wan p$i br0
	if [ "$wan6" = 0 ]; then
		nsx $P-p$i ip addr add 198.18.0.1$i/24 dev eth0
	else
		nsx $P-p$i ip addr add 2001:2::1$i/64 dev eth0 nodad
	fi
	nsx $P-p$i sysctl -qw net.ipv4.conf.eth0.promote_secondaries=1 # roaming below
done
veth $P-fl eth0 $P-wan fl br0
nsx $P-fl ip addr add 198.18.0.50/24 dev eth0
[ "$wan6" = 0 ] || nsx $P-fl ip addr add 2001:2::50/64 dev eth0 nodad
for i in 1 2; do
	veth $P-h$i eth0 $P-lan h$i br0
	nsx $P-h$i ip addr add 198.19.0.1$i/24 dev eth0
	nsx $P-h$i ip route add 198.19.0.0/16 via 198.19.0.1
	if [ "$inner6" != 0 ]; then
		nsx $P-h$i ip addr add 2001:db8:10::1$i/64 dev eth0 nodad
		nsx $P-h$i ip route add 2001:db8::/32 via 2001:db8:10::1
	fi
done
# The bridges' books: per host's MAC address, the frames the bridge took in
# for it (prerouting) and those it handed to that host's port (forward);
# the difference never reached the host (its port down, or its MAC
# forgotten and the frame flooded to the others, who drop it unseen).
macof() { nsx "$1" cat "/sys/class/net/$2/address"; }
books() { # books BRIDGE-NS PORT:NS:IF...
	local ns=$1 spec port hns hif mac; shift
	{
		echo "table bridge books {"
		echo " chain taken { type filter hook prerouting priority -300; }"
		echo " chain handed { type filter hook forward priority -300; }"
		echo "}"
	} | nsx "$ns" nft -f -
	for spec in "$@"; do
		IFS=: read -r port hns hif <<<"$spec"
		mac=$(macof "$hns" "$hif")
		nsx "$ns" nft add rule bridge books taken ether daddr "$mac" counter comment "\"in $port\""
		nsx "$ns" nft add rule bridge books handed ether daddr "$mac" oifname "$port" counter comment "\"out $port\""
		nsx "$ns" nft add rule bridge books taken iifname "$port" counter comment "\"from $port\""
		# before the bridge: what the port's link delivered (a bridge
		# port not forwarding yet drops it unseen by the chains above)
		nsx "$ns" nft add table netdev arrived
		nsx "$ns" nft add chain netdev arrived "$port" "{ type filter hook ingress device \"$port\" priority -500; }"
		nsx "$ns" nft add rule netdev arrived "$port" counter comment "\"arrived $port\""
	done
}
# With queues: the bridges send to the gateway's ports on the queue of
# the CPU that forwards (XPS), so that every queue carries traffic (a
# veth's queue is its sender's; left to itself, the bridge put nearly all
# on queue 0).
if [ "$queues" -gt 1 ]; then
	ncpu=$(nproc)
	for n in $P-wan $P-lan; do
		for q in $(seq 0 $((queues - 1))); do
			mask=0
			for c in $(seq 0 $((ncpu - 1))); do [ $((c % queues)) != "$q" ] || mask=$((mask | 1 << c)); done
			nsx "$n" sh -c "printf %x $mask >/sys/class/net/gw/queues/tx-$q/xps_cpus"
		done
	done
fi
books $P-wan gw:$P-gw:wan0 p1:$P-p1:eth0 p2:$P-p2:eth0 p3:$P-p3:eth0 fl:$P-fl:eth0
books $P-lan gw:$P-gw:lan0 h1:$P-h1:eth0 h2:$P-h2:eth0

key() { wg genkey; }
gwkey=$(key); gwpub=$(wg pubkey <<<"$gwkey")
declare -a pkey ppub
for i in 1 2 3 4; do pkey[i]=$(key); ppub[i]=$(wg pubkey <<<"${pkey[i]}"); done # 4: the flooder's
# tun PEER: the peer's tunnel addresses as allowed IPs on the gateway.
tun() { echo "198.19.100.1$1/32$([ "$inner6" = 0 ] || echo ",2001:db8:100::1$1/128")"; }
if [ "$wan6" = 0 ]; then gwep=198.18.0.1:51820; else gwep=[2001:2::1]:51820; fi
conf=$out/${P}gw.conf
{
	printf '[Interface]\nPrivateKey = %s\nListenPort = 51820\nAddress = 198.19.100.1/24%s\nMTU = 1420\n\n' \
		"$gwkey" "$([ "$inner6" = 0 ] || echo ", 2001:db8:100::1/64")"
	printf '[WGPIO]\nMode = %s\nWAN = wan0\nLAN = lan0\nAddressMode = shared\nQueues = %s\n' "$mode" "$queues"
	printf 'MetricsAddress = 127.0.0.1:9586\n'
	for i in 1 2 3 4; do
		printf '\n[Peer]\nPublicKey = %s\nAllowedIPs = %s\n' "${ppub[i]}" "$(tun $i)"
	done
} >"$conf"
chmod 600 "$conf"
ip netns exec $P-gw "$wgpio" up -c "$conf" >"$out/wgpio.log" 2>&1 &
gwpid=$!
for _ in $(seq 100); do [ -S /var/run/wireguard/${P}gw.sock ] && break; sleep 0.2; done
[ -S /var/run/wireguard/${P}gw.sock ] || { cat "$out/wgpio.log"; exit 1; }

for i in 1 2 3; do
	ip netns exec $P-p$i env WG_PROCESS_FOREGROUND=1 "$out/bin/wireguard-go" ${P}wg$i >"$out/wg-p$i.log" 2>&1 &
	pids+=($!)
done
sleep 1
for i in 1 2 3; do
	nsx $P-p$i wg set ${P}wg$i private-key <(echo "${pkey[i]}") listen-port 5182$i \
		peer "$gwpub" endpoint "$gwep" allowed-ips 198.19.0.0/16$([ "$inner6" = 0 ] || echo ,2001:db8::/32) \
		persistent-keepalive 25
	nsx $P-p$i ip addr add 198.19.100.1$i/24 dev ${P}wg$i
	nsx $P-p$i ip link set ${P}wg$i mtu 1420 up
	nsx $P-p$i ip route add 198.19.0.0/24 dev ${P}wg$i
	if [ "$inner6" != 0 ]; then
		nsx $P-p$i ip addr add 2001:db8:100::1$i/64 dev ${P}wg$i nodad
		nsx $P-p$i ip route add 2001:db8:10::/64 dev ${P}wg$i
	fi
done

# Traffic: iperf3 servers on h1 (one port per peer).
for i in 1 2 3; do
	ip netns exec $P-h1 iperf3 -s -p 520$i >/dev/null 2>&1 & pids+=($!)
done
sleep 1
if [ "$inner6" = 0 ]; then h1=198.19.0.11; fam=-4; else h1=2001:db8:10::11; fam=-6; fi
traffic() { # traffic PEER: iperf3 rounds until the end
	local i=$1 n=0
	while [ "$SECONDS" -lt "$stop" ]; do
		n=$((n + 1))
		timeout 40 ip netns exec $P-p$i iperf3 $fam -c $h1 -p 520$i -u --bidir -b 4M -l 500 -t 20 \
			-J >"$out/iperf/udp-p$i-$n.json" 2>&1 || true
		[ "$account" != 0 ] ||
			timeout 40 ip netns exec $P-p$i iperf3 $fam -c $h1 -p 520$i --bidir -b 20M -t 20 \
				-J >"$out/iperf/tcp-p$i-$n.json" 2>&1 || true
		sleep 1
	done
}
stop=$((SECONDS + minutes * 60))
waitfor=()
for i in 1 2 3; do traffic "$i" & pids+=($!); waitfor+=($!); done
# pinger ADDR: pings until the end; ping with a deadline stops at its
# first ICMP error (a removed peer's "host unreachable"), so again.
pinger() {
	while [ "$SECONDS" -lt "$stop" ]; do
		ip netns exec $P-h2 ping -q -i 0.2 -w $((stop - SECONDS)) "$1" 2>&1 | grep -E 'transmitted|loss' || true
	done
}
for i in 1 2 3; do
	[ "$account" = 0 ] || break
	pinger 198.19.100.1$i >"$out/ping-p$i.log" & pids+=($!)
	[ "$inner6" = 0 ] || { pinger 2001:db8:100::1$i >"$out/ping6-p$i.log" & pids+=($!); }
done

# Churn: one step every 3 s.
dummies=()
churn() {
	local step=0 i k addr port ep
	set +e
	while [ "$SECONDS" -lt "$stop" ]; do
		step=$((step + 1))
		i=$((step % 3 + 1))
		kind=$((step % 10))
		case " $steps " in *" $kind "*) ;; *) kind=-;; esac
		echo "step $step at $(date +%s) kind $kind"
		# a dummy peer added; the oldest removed past 20
		k=$(key | wg pubkey)
		dummies+=("$k")
		wg set ${P}gw peer "$k" allowed-ips "198.19.$((200 + step % 8)).$((step % 250 + 1))/32$([ "$inner6" = 0 ] ||
			echo ",2001:db8:$((200 + step % 8))::$((step % 250 + 1))/128")"
		if [ ${#dummies[@]} -gt 20 ]; then
			wg set ${P}gw peer "${dummies[0]}" remove
			dummies=("${dummies[@]:1}")
		fi
		# a peer's allowed IPs changed, every other step back
		if [ $((step % 2)) -eq 0 ]; then
			wg set ${P}gw peer "${ppub[i]}" allowed-ips "$(tun $i),198.19.15$i.0/24$([ "$inner6" = 0 ] ||
				echo ",2001:db8:15$i::/64")"
		else
			wg set ${P}gw peer "${ppub[i]}" allowed-ips "$(tun $i)"
		fi
		case $kind in
		1) # wg syncconf: the file plus the dummies (endpoints kept)
			{ "$wgpio" strip "$conf"; for k in "${dummies[@]:0:10}"; do
				printf '\n[Peer]\nPublicKey = %s\nAllowedIPs = 198.19.220.%d/32\n' "$k" $((RANDOM % 250 + 1)); done
			} >"$out/sync.conf"
			wg syncconf ${P}gw "$out/sync.conf"
			dummies=("${dummies[@]:0:10}") ;;
		2) # roaming: a new source port
			port=$((40000 + RANDOM % 20000))
			nsx $P-p$i wg set ${P}wg$i listen-port "$port" ;;
		3) # roaming: a new source address
			if [ "$wan6" = 0 ]; then
				addr=$(nsx $P-p$i ip -4 -o addr show dev eth0 | awk '{print $4; exit}')
				if [ "$addr" = "198.18.0.1$i/24" ]; then new=198.18.0.4$i/24; else new=198.18.0.1$i/24; fi
			else
				addr=$(nsx $P-p$i ip -6 -o addr show dev eth0 scope global | awk '{print $4; exit}')
				if [ "$addr" = "2001:2::1$i/64" ]; then new=2001:2::4$i/64; else new=2001:2::1$i/64; fi
			fi
			nsx $P-p$i ip addr add "$new" dev eth0 nodad
			nsx $P-p$i ip addr del "$addr" dev eth0 ;;
		4) # the WAN or the LAN MTU changed
			dev=$([ $((step % 20)) -lt 10 ] && echo wan0 || echo lan0)
			mtu=$(nsx $P-gw cat /sys/class/net/$dev/mtu)
			nsx $P-gw ip link set "$dev" mtu $([ "$mtu" = 1500 ] && echo 1400 || echo 1500) ;;
		5) # the WAN or the LAN link down for 2 s
			dev=$([ $((step % 20)) -lt 10 ] && echo wan0 || echo lan0)
			nsx $P-gw ip link set "$dev" down; sleep 2; nsx $P-gw ip link set "$dev" up ;;
		6) # a peer removed under traffic and added back
			ep=$(wg show ${P}gw endpoints | awk -v k="${ppub[i]}" '$1 == k {print $2}')
			wg set ${P}gw peer "${ppub[i]}" remove; sleep 1
			wg set ${P}gw peer "${ppub[i]}" allowed-ips "$(tun $i)" \
				$([ "$ep" = "(none)" ] || [ -z "$ep" ] || echo endpoint "$ep") ;;
		7) # packets held for a peer that never answers, then it is removed
			k=$(key | wg pubkey)
			if [ "$wan6" = 0 ]; then ep=198.18.0.99:51820; else ep=[2001:2::99]:51820; fi
			wg set ${P}gw peer "$k" endpoint "$ep" allowed-ips 198.19.210.0/24$([ "$inner6" = 0 ] || echo ,2001:db8:210::/64)
			if [ "$inner6" = 0 ]; then
				nsx $P-h2 ping -q -c 40 -i 0.05 198.19.210.1 >/dev/null 2>&1 || true
			else
				nsx $P-h2 ping -6 -q -c 40 -i 0.05 2001:db8:210::1 >/dev/null 2>&1 || true
			fi
			wg set ${P}gw peer "$k" remove ;;
		esac
		sleep 3
	done
}
churn >"$out/churn.log" 2>&1 & pids+=($!); waitfor+=($!)

flood() {
	sleep 120
	[ "$account" = 0 ] || return 0
	nsx $P-fl "$out/bin/soakflood" -to "$gwep" -pub "$gwpub" -known "${pkey[4]}" \
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
# rcvbuf: the UDP datagrams the receivers (h1, the peers) had no room for so far
rcvbuf() {
	local n t=0
	for n in $P-h1 $P-p1 $P-p2 $P-p3; do
		t=$((t + $(nsx "$n" awk '$1 == "Udp6RcvbufErrors" {s += $2} $1 == "Udp:" {if (h) s += $x; else for (i = 2; i <= NF; i++) if ($i == "RcvbufErrors") x = i; h = !h} END {print s + 0}' /proc/net/snmp /proc/net/snmp6)))
	done
	echo "$t"
}
printf 'sec\trss_kB\tthreads\tfds\tgoroutines\theap_inuse_kB\theld\tpeers\tbpf_entries\troutes4\troutes6\tstats_ok\trcvbuf\n' >"$out/samples.tsv"
while [ "$SECONDS" -lt "$stop" ] && kill -0 "$gwpid" 2>/dev/null; do
	m=$out/metrics/$SECONDS.txt
	nsx $P-gw curl -sf --max-time 4 http://127.0.0.1:9586/metrics >"$m" || true
	ok=1; nsx $P-gw "$wgpio" stats ${P}gw >"$out/stats.txt" 2>&1 || ok=0
	printf '%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n' "$SECONDS" \
		"$(awk '/^VmRSS/ {print $2}' /proc/$gwpid/status)" "$(ls /proc/$gwpid/task | wc -l)" \
		"$(ls /proc/$gwpid/fd | wc -l)" "$(metric go_goroutines "$m")" \
		$(($(metric go_memstats_heap_inuse_bytes "$m") / 1024)) "$(metric wgpio_packets_held "$m")" \
		"$(metric wgpio_peers "$m")" "$(bpf_entries)" \
		"$(nsx $P-gw ip -4 route show table all | wc -l)" "$(nsx $P-gw ip -6 route show table all | wc -l)" \
		"$ok" "$(rcvbuf)" >>"$out/samples.tsv"
	sleep 5
done
wait "${waitfor[@]}" 2>/dev/null || true

# wg show against the peers' own view: with the churn over, 5 s of UDP
# both ways per peer; the bytes the gateway's wg show counts for a peer in
# that time against what the peer's counts, and the handshake times.
wgview() { # wgview: per peer "pN gw_rx gw_tx gw_handshake peer_rx peer_tx peer_handshake"
	local i
	for i in 1 2 3; do
		echo "p$i $(wg show ${P}gw dump | awk -v k="${ppub[i]}" '$1 == k {print $6, $7, $5}') $(nsx $P-p$i wg show ${P}wg$i dump | awk 'NR == 2 {print $6, $7, $5}')"
	done
}
wgview >"$out/wgview-1.txt"
check=()
for i in 1 2 3; do
	timeout 20 ip netns exec $P-p$i iperf3 $fam -c $h1 -p 520$i -u --bidir -b 4M -l 500 -t 5 >/dev/null 2>&1 &
	check+=($!)
done
wait "${check[@]}" || true
sleep 2
wgview >"$out/wgview-2.txt"
echo "== wg show: 5 s of UDP after the churn, the gateway's bytes for a peer against the peer's own (received, sent; equal when nothing was lost between), handshake times"
join "$out/wgview-1.txt" "$out/wgview-2.txt" | awk '{printf "%s\tgateway received %d, peer sent %d\tgateway sent %d, peer received %d\thandshake gateway %d, peer %d\n",
	$1, $8 - $2, $12 - $6, $9 - $3, $11 - $5, $10, $13}'


alive=1; kill -0 "$gwpid" 2>/dev/null || alive=0
sleep 2 # what is in flight lands
last=$out/metrics/end.txt
nsx $P-gw curl -sf --max-time 4 http://127.0.0.1:9586/metrics >"$last" || true
nsx $P-gw ip route show table all >"$out/routes-end.txt"
nsx $P-gw wg show ${P}gw >"$out/wg-end.txt" 2>&1 || true
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
awk '/^step/ && $6 >= 2 && $6 <= 6 {print $4}' "$out/churn.log" >"$out/disruptions.txt"
for f in "$out"/iperf/udp-*.json; do
	jq -r '[.start.timestamp.timesecs, ([.end.streams[]?.udp.packets] | add), ([.end.streams[]?.udp.lost_packets] | add)] | @tsv' "$f" 2>/dev/null
done | awk 'NR == FNR {t[NR] = $1; n = NR; next}
	{calm = 1; for (i = 1; i <= n; i++) if (t[i] >= $1 - 2 && t[i] <= $1 + 25) calm = 0
	 k = calm ? "calm" : "disrupted"; runs[k]++; sent[k] += $2; lost[k] += $3}
	END {for (k in runs) printf "%s rounds: %d, datagrams %d, lost %d\n", k, runs[k], sent[k], lost[k]}' \
	"$out/disruptions.txt" - || true
echo "== kernel drops per namespace (IPv4 with IpExt, IPv6, UDP errors and discards; the links' rx and tx dropped)"
for n in "${nss[@]}"; do
	printf '%s\t%s%s link_drops=%s\n' "$n" "$(nsx "$n" awk '/^(Ip|Udp|IpExt):/ {
		if (!seen[$1]++) {for (i = 2; i <= NF; i++) h[$1, i] = $i; next}
		for (i = 2; i <= NF; i++) if (h[$1, i] ~ /Err|Discard|NoRoute|Fail/ && $i > 0) printf "%s%s=%s ", $1, h[$1, i], $i}' /proc/net/snmp /proc/net/netstat)" \
		"$(nsx "$n" awk '$1 ~ /^(Ip6|Udp6)/ && $1 ~ /Err|Discard|NoRoute|Fail|TooBig/ && $2 > 0 {printf "%s=%s ", $1, $2}' /proc/net/snmp6)" \
		"$(nsx "$n" ip -s -j link | jq '[.[].stats64 | .rx.dropped + .tx.dropped] | add')"
done
echo "== the bridges' books: frames taken in for a host's MAC, handed to its port, and lost between; frames its port's link delivered and the bridge dropped on arrival"
for n in $P-wan $P-lan; do
	{ nsx "$n" nft -j list table bridge books; nsx "$n" nft -j list table netdev arrived; } | jq -s -r --arg ns "$n" '
		[.[].nftables[] | .rule? | select(.) | {c: .comment, p: (.expr[] | .counter? | select(.) | .packets)}]
		| map({key: .c, value: .p}) | from_entries as $m
		| $m | keys | map(select(startswith("in "))) | .[] | ltrimstr("in ") as $port
		| "\($ns)\t\($port)\tfor it in=\($m["in " + $port])\tto its port=\($m["out " + $port])\tlost=\($m["in " + $port] - $m["out " + $port])\tfrom its port=\($m["from " + $port])\tarrived from it=\($m["arrived " + $port])\tdropped on arrival=\($m["arrived " + $port] - $m["from " + $port])"'
done | tee "$out/books.txt"
# The gateway's balance: frames the bridges handed to its ports against
# those its ports' links delivered to the bridges; the difference is what
# it dropped or took for itself (handshakes, keepalives, ARP and ND, to
# the host) less what it made (its handshakes, ICMP errors, fragments).
awk -F'\t' '$2 == "gw" {split($4, a, "="); split($7, b, "="); tin += a[2]; tout += b[2]}
	END {printf "gateway: frames to its ports %d, from its ports %d, in - out %d\n", tin, tout, tin - tout}' "$out/books.txt"
# (wireguard-go writes coalesced packets into its TUN, GRO: a TUN packet can be several datagrams)
echo "== the peers' frames: eth0 (WAN) and TUN (what wireguard-go passed each way), and the TUN's drops"
for i in 1 2 3; do
	nsx $P-p$i ip -s -j link | jq -r --arg p "p$i" --arg t "${P}wg$i" '
		(map({key: .ifname, value: .stats64}) | from_entries) as $l
		| "\($p)\teth0 rx=\($l.eth0.rx.packets) tx=\($l.eth0.tx.packets)\ttun rx=\($l[$t].rx.packets) tx=\($l[$t].tx.packets) tx_dropped=\($l[$t].tx.dropped)"'
done
echo "== the gateway's exception TUN (rx: what wgpio handed the host; tx: what the host sent into it)"
nsx $P-gw ip -s -j link show dev ${P}gw 2>/dev/null | jq -r '.[0].stats64 | "rx=\(.rx.packets) rx_dropped=\(.rx.dropped) tx=\(.tx.packets) tx_dropped=\(.tx.dropped)"' || echo none
echo "== the gateway's drop counters (after the traffic ended)"
grep -E '^wgpio_[a-z_]*drops_total' "$last" | awk '$2 > 0 {print; s += $2} END {printf "sum %d\n", s}' || true
for f in "$out"/ping*-p*.log; do
	[ -s "$f" ] || continue
	awk -v f="$(basename "$f" .log)" '/transmitted/ {tx += $1; rx += $4} END {printf "%s: %d pings, %d answered\n", f, tx, rx}' "$f"
done
cat "$out/flood.log"
if [ "$alive" = 0 ]; then echo "soak: wgpio died; its log:"; tail -50 "$out/wgpio.log"; exit 1; fi
echo "soak: wgpio alive after $minutes minutes"
