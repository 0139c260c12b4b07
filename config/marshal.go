package config

import (
	"net/netip"
	"strconv"
	"strings"
)

// Marshal renders f in the file format, one section after another
// ([Interface], [WGPIO] if any of its fields is set, then each [Peer]), with
// canonical key names and no comments. Parse(Marshal(f)) gives back f's
// settings (not its line numbers). The output holds the private and
// pre-shared keys in base64: treat it as secret.
func (f *File) Marshal() []byte {
	var b cfgWriter
	kv := b.kv
	in := &f.Interface
	b.WriteString("[Interface]\n")
	kv("PrivateKey", in.PrivateKey.Base64())
	if in.ListenPort != 0 {
		kv("ListenPort", strconv.Itoa(int(in.ListenPort)))
	}
	b.prefixLines("Address", in.Addresses)
	if in.MTU != 0 {
		kv("MTU", strconv.Itoa(in.MTU))
	}
	for _, s := range in.Unused {
		kv(s.Key, s.Value)
	}

	if w := &f.WGPIO; !w.isZero() {
		b.WriteString("\n[WGPIO]\n")
		if w.Mode != "" {
			kv("Mode", string(w.Mode))
		}
		if w.WAN != "" {
			kv("WAN", w.WAN)
		}
		if w.LAN != "" {
			kv("LAN", w.LAN)
		}
		if w.WANVLAN != 0 {
			kv("WANVLAN", strconv.Itoa(int(w.WANVLAN)))
		}
		if w.LANVLAN != 0 {
			kv("LANVLAN", strconv.Itoa(int(w.LANVLAN)))
		}
		if w.AddressMode != "" {
			kv("AddressMode", string(w.AddressMode))
		}
		if w.Queues != 0 {
			kv("Queues", strconv.Itoa(w.Queues))
		}
		if len(w.CPUs) > 0 {
			kv("CPUs", formatCPUs(w.CPUs))
		}
		if w.HandshakeWorkers != 0 {
			kv("HandshakeWorkers", strconv.Itoa(w.HandshakeWorkers))
		}
		if w.SourcePorts.First != 0 {
			v := strconv.Itoa(int(w.SourcePorts.First))
			if w.SourcePorts.Last != w.SourcePorts.First {
				v += "-" + strconv.Itoa(int(w.SourcePorts.Last))
			}
			kv("SourcePorts", v)
		}
		if w.WANAddress.IsValid() {
			kv("WANAddress", w.WANAddress.String())
		}
		if w.LANAddress.IsValid() {
			kv("LANAddress", w.LANAddress.String())
		}
		if w.Gateway.IsValid() {
			kv("Gateway", w.Gateway.String())
		}
		if w.XDPMode != "" {
			kv("XDPMode", string(w.XDPMode))
		}
		if w.MetricsAddress != "" {
			kv("MetricsAddress", w.MetricsAddress)
		}
		if w.MetricsPeers == Off {
			kv("MetricsPeers", "off")
		} else if w.MetricsPeers != 0 {
			kv("MetricsPeers", strconv.Itoa(w.MetricsPeers))
		}
		switch w.MSSClamp {
		case 0:
		case MSSClampAuto:
			kv("MSSClamp", "auto")
		case MSSClampOff:
			kv("MSSClamp", "off")
		default:
			kv("MSSClamp", strconv.Itoa(w.MSSClamp))
		}
		if w.ICMPRate == Off {
			kv("ICMPRate", "off")
		} else if w.ICMPRate != 0 {
			kv("ICMPRate", strconv.Itoa(w.ICMPRate))
		}
		if w.ICMPBurst != 0 {
			kv("ICMPBurst", strconv.Itoa(w.ICMPBurst))
		}
		if w.ICMPDestInterval == Off {
			kv("ICMPDestInterval", "off")
		} else if w.ICMPDestInterval != 0 {
			kv("ICMPDestInterval", strconv.FormatInt(w.ICMPDestInterval.Milliseconds(), 10))
		}
		switch w.ReplayWindow {
		case 0:
		case ReplayWindowAuto:
			kv("ReplayWindow", "auto")
		default:
			kv("ReplayWindow", strconv.Itoa(w.ReplayWindow))
		}
	}

	b.peers(f.Peers, true)
	return []byte(b.String())
}

// cfgWriter builds text in the file format (Marshal, WG).
type cfgWriter struct{ strings.Builder }

// kv writes the line "k = v".
func (b *cfgWriter) kv(k, v string) {
	b.WriteString(k)
	b.WriteString(" = ")
	b.WriteString(v)
	b.WriteByte('\n')
}

// peers writes a [Peer] section for each of ps, the keys wg(8) knows that
// are set (PersistentKeepalive also when written as 0 or off:
// Peer.KeepaliveOff). With names, an Endpoint written as a host name is written so,
// else as the address Parse resolved it to.
func (b *cfgWriter) peers(ps []Peer, names bool) {
	for i := range ps {
		p := &ps[i]
		b.WriteString("\n[Peer]\n")
		b.kv("PublicKey", p.PublicKey.Base64())
		if !p.PresharedKey.IsZero() {
			b.kv("PresharedKey", p.PresharedKey.Base64())
		}
		b.prefixLines("AllowedIPs", p.AllowedIPs)
		if names && p.EndpointHost != "" {
			b.kv("Endpoint", p.EndpointHost+":"+strconv.Itoa(int(p.Endpoint.Port())))
		} else if p.Endpoint.IsValid() {
			b.kv("Endpoint", p.Endpoint.String())
		}
		if p.PersistentKeepalive != 0 || p.KeepaliveOff {
			b.kv("PersistentKeepalive", strconv.Itoa(int(p.PersistentKeepalive)))
		}
	}
}

func (w *WGPIO) isZero() bool {
	return w.Mode == "" && w.WAN == "" && w.LAN == "" && w.WANVLAN == 0 && w.LANVLAN == 0 && w.AddressMode == "" && w.Queues == 0 &&
		len(w.CPUs) == 0 && w.HandshakeWorkers == 0 && w.SourcePorts == (PortRange{}) && !w.WANAddress.IsValid() &&
		!w.LANAddress.IsValid() && !w.Gateway.IsValid() && w.XDPMode == "" && w.MetricsAddress == "" && w.MetricsPeers == 0 &&
		w.MSSClamp == 0 && w.ICMPRate == 0 && w.ICMPBurst == 0 && w.ICMPDestInterval == 0 &&
		w.ReplayWindow == 0
}

// maxListLine is the longest comma list prefixLines writes on one line, in
// bytes: well under MaxLine, which Parse refuses.
const maxListLine = MaxLine / 4

// prefixLines writes ps as "k = a, b, ..." lines, as many as it takes to
// keep each list under maxListLine bytes: a peer's allowed IPs may be more
// than one line holds (a country's block list), and repeated AllowedIPs
// lines add up, in wg(8) and wg-quick(8) as in Parse (so do Address
// lines). Nothing for no ps.
func (b *cfgWriter) prefixLines(k string, ps []netip.Prefix) {
	line := -1 // bytes of the list on the open line; -1: no line open
	for _, p := range ps {
		if line >= maxListLine {
			b.WriteByte('\n')
			line = -1
		}
		if line < 0 {
			b.WriteString(k)
			b.WriteString(" = ")
			line = 0
		} else {
			b.WriteString(", ")
			line += 2
		}
		s := p.String()
		b.WriteString(s)
		line += len(s)
	}
	if line >= 0 {
		b.WriteByte('\n')
	}
}

// formatCPUs writes a CPU list in order, folding ascending runs into ranges.
func formatCPUs(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// UAPI renders the WireGuard part of f ([Interface] and the peers; not
// Address, MTU, the unused keys or [WGPIO], which are not WireGuard device
// settings) as the body of a UAPI "set=1" operation, the form `wg setconf`
// sends and wireguard-go's (*device.Device).IpcSet takes
// (https://www.wireguard.com/xplatform/#configuration-protocol):
//
//	private_key=<hex>
//	listen_port=<port>                    (if set)
//	fwmark=<mark>                         (if set, decimal)
//	replace_peers=true
//	public_key=<hex>                      (then per peer)
//	preshared_key=<hex>                   (if set)
//	endpoint=<ip:port or [ip6]:port>      (if set; a host name already resolved)
//	persistent_keepalive_interval=<secs>  (if set)
//	replace_allowed_ips=true
//	allowed_ip=<cidr>                     (one line each)
//
// Each line ends in "\n"; there is no "set=1" line and no terminating blank
// line (the socket protocol adds both). Applying it replaces the device's
// whole peer set, as `wg setconf` does. The output holds the private key:
// treat it as secret.
func (f *File) UAPI() string { return f.uapi(nil) }

// uapi writes UAPI's lines; with running non-nil (the device's peers by
// key, hex, and their allowed IPs, masked, in the device's order), SyncUAPI's device and peer
// lines: no replace_peers, fwmark whenever the file sets FwMark (off
// included), a running peer's preshared key and keepalive cleared when f
// has none, and a running peer's allowed IPs edited (syncAllowedIPs)
// rather than replaced, and a new peer's prefixes that a later peer
// takes left out.
func (f *File) uapi(running map[string][]netip.Prefix) string {
	sync := running != nil
	var owners map[netip.Prefix]*Peer
	if sync {
		owners = f.owners()
	}
	var b strings.Builder
	kv := func(k, v string) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
		b.WriteByte('\n')
	}
	// listen_port first: a running device may refuse it (a port another
	// socket holds), and a device applies a set's lines in order up to
	// the first it refuses. After the private key, a refused port left
	// the new key applied and the peers not: every session's peer still
	// expected the old key.
	if f.Interface.ListenPort != 0 {
		kv("listen_port", strconv.Itoa(int(f.Interface.ListenPort)))
	}
	kv("private_key", f.Interface.PrivateKey.Hex())
	if _, set := f.Interface.Lines["FwMark"]; f.Interface.FwMark != 0 || sync && set {
		kv("fwmark", strconv.FormatUint(uint64(f.Interface.FwMark), 10))
	}
	if !sync {
		kv("replace_peers", "true")
	}
	for i := range f.Peers {
		p := &f.Peers[i]
		pub := p.PublicKey.Hex()
		kv("public_key", pub)
		held, kept := running[pub]
		if !p.PresharedKey.IsZero() || kept {
			kv("preshared_key", p.PresharedKey.Hex())
		}
		if p.Endpoint.IsValid() {
			kv("endpoint", p.Endpoint.String())
		}
		if p.PersistentKeepalive != 0 || kept {
			kv("persistent_keepalive_interval", strconv.Itoa(int(p.PersistentKeepalive)))
		}
		if kept {
			syncAllowedIPs(&b, p, held, owners)
			continue
		}
		kv("replace_allowed_ips", "true")
		for _, a := range p.AllowedIPs {
			// A prefix a later peer of f gets is not sent (sync): that
			// peer already holds it when it is running and says it
			// again when it is not, and this line, the last naming it,
			// would give it to p (UAPI: the last peer named with a
			// prefix takes it; the file's rule: the later peer).
			if !sync || owners[a.Masked()] == p {
				kv("allowed_ip", a.String())
			}
		}
	}
	return b.String()
}
