package config

import (
	"bufio"
	"net/netip"
	"strings"
)

// RunningPeer is a peer of a running device as its UAPI "get=1" reply
// lists it.
type RunningPeer struct {
	PublicKey  string         // lowercase hex, as get=1 prints it
	AllowedIPs []netip.Prefix // masked, in the reply's order
}

// RunningPeers reads the peers of a UAPI "get=1" reply (its public_key
// and allowed_ip lines), in the reply's order. A line it cannot parse is
// skipped: an allowed IP missing from the result only costs SyncUAPI a
// line that sets what is already set.
func RunningPeers(get string) []RunningPeer {
	var peers []RunningPeer
	sc := bufio.NewScanner(strings.NewReader(get))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch {
		case k == "public_key":
			peers = append(peers, RunningPeer{PublicKey: v})
		case k == "allowed_ip" && len(peers) > 0:
			if p, err := netip.ParsePrefix(v); err == nil {
				last := &peers[len(peers)-1]
				last.AllowedIPs = append(last.AllowedIPs, p.Masked())
			}
		}
	}
	return peers
}

// SyncUAPI is the body of a UAPI "set=1" operation that applies f to a
// running device as `wg syncconf` applies a file: UAPI's lines without
// replace_peers, so that the sessions of the peers f keeps go on, an
// fwmark line also for "FwMark = off", and "public_key=<hex>" then
// "remove=true" for each peer of running (the device's peers, from
// RunningPeers of its get=1 reply) that f does not list.
//
// A peer of running that f lists without PresharedKey gets
// "preshared_key=" and 64 zeros (none), and one without
// PersistentKeepalive (or with 0, "off") gets
// "persistent_keepalive_interval=0": a key removed from the file is
// removed from the device, as wg(8)'s syncconf does since
// wireguard-tools commit 780182e ("wg syncconf: explicitly reset
// PresharedKey/PersistentKeepalive if not set"; src/setconf.c,
// sync_conf). wg(8) sends them only when the running peer has a key or a
// keepalive; sending them to a peer without changes nothing. A peer's
// Endpoint removed from the file is not sent, and the device keeps the
// endpoint it has (configured or roamed), as with wg(8): the protocol
// has no way to clear one.
//
// A new peer's allowed IPs are set as UAPI sets them (replace_allowed_ips,
// then each). A running peer's are edited instead (syncAllowedIPs): only
// what the file changes is sent, so that an allowed IP the peer keeps is
// routed to it all through the operation. wg(8) sends replace_allowed_ips
// and the whole list, and wireguard-go applies each line on its own
// (device/uapi.go: RemoveByPeer, then Insert per line), so that a packet
// forwarded between the two lines found no peer for its destination and
// was dropped, uncounted (in Mode = compat, 572 reloads of an unchanged
// file in 20 s lost 10 of 220,000 packets to its two peers).
// The edit starts from running, read before the operation: an allowed IP
// a concurrent `wg set` gives a running peer meanwhile stays with it (wg
// syncconf's replace would remove it), as a peer it adds meanwhile stays.
// The output holds the private key: treat it as secret.
func (f *File) SyncUAPI(running []RunningPeer) string {
	held := make(map[string][]netip.Prefix, len(running))
	for _, r := range running {
		ps := make([]netip.Prefix, len(r.AllowedIPs))
		for i, p := range r.AllowedIPs {
			ps[i] = p.Masked()
		}
		held[r.PublicKey] = ps
	}
	var b strings.Builder
	b.WriteString(f.uapi(held))
	listed := make(map[string]bool, len(f.Peers))
	for i := range f.Peers {
		listed[f.Peers[i].PublicKey.Hex()] = true
	}
	for _, r := range running {
		if !listed[r.PublicKey] {
			b.WriteString("public_key=" + r.PublicKey + "\nremove=true\n")
		}
	}
	return b.String()
}

// owners maps each allowed IP (masked) of f to the peer that gets it: the
// last [Peer] that lists it, as in WireGuard, where a later peer takes a
// prefix from an earlier one.
func (f *File) owners() map[netip.Prefix]*Peer {
	m := make(map[netip.Prefix]*Peer)
	for i := range f.Peers {
		for _, a := range f.Peers[i].AllowedIPs {
			m[a.Masked()] = &f.Peers[i]
		}
	}
	return m
}

// syncAllowedIPs writes the allowed_ip lines that take a running peer p
// from held (its allowed IPs now, masked, in the device's order) to those
// f gives it (owners): "allowed_ip=<prefix>" for each prefix p gets and
// does not hold, in file order, then "allowed_ip=-<prefix>" for each it
// holds that no peer of f lists, in held's order. A prefix p holds that
// another peer of f gets is not removed here: that peer's allowed_ip line
// moves it (UAPI gives a prefix to the last peer named with it), and
// removing it first would leave it without a peer until then. A prefix p
// lists that a later peer of f takes is not sent: it would move to p and
// back within the operation.
func syncAllowedIPs(b *strings.Builder, p *Peer, held []netip.Prefix, owners map[netip.Prefix]*Peer) {
	has := make(map[netip.Prefix]bool, len(held))
	for _, h := range held {
		has[h] = true
	}
	for _, a := range p.AllowedIPs {
		if m := a.Masked(); owners[m] == p && !has[m] {
			b.WriteString("allowed_ip=" + a.String() + "\n")
		}
	}
	for _, h := range held {
		if _, listed := owners[h]; !listed {
			b.WriteString("allowed_ip=-" + h.String() + "\n")
		}
	}
}
