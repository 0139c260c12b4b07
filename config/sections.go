package config

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/wgpio/wgpio/noise"
)

// The keys of each section: [Interface], [Peer] (with Endpoint) and [WGPIO].

func (p *parser) interfaceKey(n int, key, v string) {
	in := &p.f.Interface
	switch key {
	case "PrivateKey":
		k, err := noise.ParsePrivateKey(v)
		if err != nil {
			p.errorf(n, key, "not a base64 32-byte key%s", keyHint(v))
			return
		}
		if k.IsZero() {
			p.errorf(n, key, "all zero, which is no key (make one with `wg genkey`)")
			return
		}
		in.PrivateKey = k
		k.Zero()
	case "ListenPort":
		if port, ok := p.port(n, key, v); ok {
			in.ListenPort = port
		}
	case "Address":
		for _, s := range splitList(v) {
			pf, ok := p.prefix(n, key, s)
			if !ok {
				continue
			}
			// The address is given to the exception TUN (wg-quick: ip
			// address add): 0.0.0.0/0 there would route every
			// destination into the tunnel, 127.0.0.1/8 shadow loopback.
			if !isHostAddr(pf.Addr()) {
				p.errorf(n, key, "%s is not a unicast address this interface can have (write its own address, as in 10.0.0.1/24)", quoteShort(s))
				continue
			}
			if slices.Contains(in.Addresses, pf) {
				// wg-quick's second `ip address add` fails (File exists).
				p.warnf(n, key, "%s is listed twice; once is enough", pf)
				continue
			}
			in.Addresses = append(in.Addresses, pf)
		}
	case "MTU":
		if m, ok := p.number(n, key, v, MinMTU, MaxMTU, ""); ok {
			in.MTU = m
		}
	}
}

func (p *parser) peerKey(n int, key, v string) {
	peer := &p.f.Peers[len(p.f.Peers)-1]
	switch key {
	case "PublicKey":
		k, err := noise.ParsePublicKey(v)
		if err != nil {
			p.errorf(n, key, "not a base64 32-byte key%s", keyHint(v))
			return
		}
		if k == (noise.PublicKey{}) {
			p.errorf(n, key, "all zero, which is no peer's key")
			return
		}
		if first, dup := p.pubs[k]; dup {
			p.errorf(n, key, "duplicate peer; the [Peer] at line %d has the same PublicKey", first)
			return
		}
		p.pubs[k] = peer.Line
		p.pubLines[len(p.pubLines)-1] = n
		peer.PublicKey = k
	case "PresharedKey":
		k, err := noise.ParsePresharedKey(v)
		if err != nil {
			p.errorf(n, key, "not a base64 32-byte key%s", keyHint(v))
			return
		}
		peer.PresharedKey = k
		k.Zero()
	case "AllowedIPs":
		if v == "" {
			// wg(8) refuses a key without a value ("Line
			// unrecognized: `AllowedIPs='") and so the file, as it
			// refuses an empty item.
			p.errorf(n, key, "empty value: wg(8) refuses the line; give the prefixes, or remove the line")
			return
		}
		if at, ok := emptyItem(v); ok {
			// wg(8) setconf, which wg-quick hands this line to,
			// refuses it ("Unable to parse IP address: `'") and sets
			// nothing; dropping the item instead would start a peer
			// from a line the file's author may have cut a prefix from.
			p.errorf(n, key, "an empty item %s: wg(8) refuses the line; remove the extra ','", at)
		}
		for _, s := range splitList(v) {
			pf, ok := p.prefix(n, key, s)
			if !ok {
				continue
			}
			if m := pf.Masked(); m != pf {
				p.warnf(n, key, "%s has host bits set; it means %s", pf, m)
				pf = m
			}
			if prev, ok := p.allowedAt[pf]; ok && prev != peer.Line {
				p.warnf(n, key, "%s is also in the [Peer] at line %d; this later peer takes it, as in WireGuard", pf, prev)
			} else if ok { // this peer's already (a map look-up: a peer may have thousands)
				p.warnf(n, key, "%s is listed twice for this peer; once is enough", pf)
				continue
			}
			p.allowedAt[pf] = peer.Line
			peer.AllowedIPs = append(peer.AllowedIPs, pf)
		}
	case "Endpoint":
		p.endpoint(n, peer, v)
	case "PersistentKeepalive":
		if strings.EqualFold(v, "off") {
			peer.PersistentKeepalive, peer.KeepaliveOff = 0, true
			return
		}
		if s, ok := p.number(n, key, v, 0, 65535, ` of seconds or "off"`); ok {
			peer.PersistentKeepalive, peer.KeepaliveOff = uint16(s), s == 0
		}
	}
}

func (p *parser) endpoint(n int, peer *Peer, v string) {
	const key = "Endpoint"
	var host, port string
	if strings.HasPrefix(v, "[") {
		i := strings.LastIndex(v, "]")
		if i < 0 || i+1 >= len(v) || v[i+1] != ':' {
			p.errorf(n, key, "%s: want [IPv6]:port", quoteShort(v))
			return
		}
		host, port = v[1:i], v[i+2:]
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			p.errorf(n, key, "%s is not an IPv6 address", quoteShort(host))
			return
		}
		if a.Zone() != "" {
			// The fast path sends to routed endpoints; a zone names an
			// interface, which it would not honour.
			p.errorf(n, key, "%s: an address with a zone (%%%s) is not supported; use a global address", quoteShort(host), a.Zone())
			return
		}
	} else {
		i := strings.LastIndex(v, ":")
		if i < 0 {
			p.errorf(n, key, "%s has no port; want host:port or [IPv6]:port", quoteShort(v))
			return
		}
		host, port = v[:i], v[i+1:]
		if strings.Contains(host, ":") {
			p.errorf(n, key, "%s: an IPv6 address needs brackets, as in [2001:db8::1]:51820", quoteShort(v))
			return
		}
	}
	pn, ok := p.port(n, key, port)
	if !ok {
		return
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a = a.Unmap(); !unicastEndpoint(a) {
			p.errorf(n, key, "%s is not a unicast address (write the peer's address, or leave Endpoint out to learn it from the peer)", a)
			return
		}
		peer.Endpoint = netip.AddrPortFrom(a, pn)
		peer.EndpointHost = ""
		return
	}
	if !isHostName(host) {
		p.errorf(n, key, "%s is not an IP address or a host name", quoteShort(host))
		return
	}
	if p.deferResolve {
		p.pending = append(p.pending, pendingEndpoint{peer: len(p.f.Peers) - 1, line: n, host: host, port: pn})
		return
	}
	addrs, err := p.opts.Resolve(host)
	p.resolved(n, peer, host, pn, addrs, err)
}

// resolved sets peer's Endpoint (line n) from the lookup of host (port
// pn): its first unicast address, or an error at the line.
func (p *parser) resolved(n int, peer *Peer, host string, pn uint16, addrs []netip.Addr, err error) {
	const key = "Endpoint"
	if err != nil {
		p.errs = append(p.errs, &Error{File: p.f.Name, Line: n, Key: key, Msg: fmt.Sprintf("resolve %q: %v", host, err), Err: err})
		return
	}
	var refused []string
	for _, a := range addrs {
		if !a.IsValid() {
			continue
		}
		if a = a.Unmap(); !unicastEndpoint(a) {
			// A DNS block list answers 0.0.0.0 or :: for the names
			// it blocks: no peer is there.
			refused = append(refused, a.String())
			continue
		}
		peer.Endpoint = netip.AddrPortFrom(a, pn)
		peer.EndpointHost = host
		return
	}
	if len(refused) > 0 {
		p.errorf(n, key, "resolve %q: %s, not a unicast address (a DNS block list answers so for a name it blocks)", host, strings.Join(refused, ", "))
		return
	}
	p.errorf(n, key, "resolve %q: no addresses", host)
}

// unicastEndpoint reports whether a (unmapped) can be a peer's address:
// not unspecified, multicast or the limited broadcast address.
func unicastEndpoint(a netip.Addr) bool {
	return !a.IsUnspecified() && !a.IsMulticast() && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// isHostName reports whether s is a syntactically valid DNS host name (RFC
// 1123 section 2.1: labels of letters, digits and hyphens, not starting or
// ending with a hyphen, at most 63 bytes each and 253 in all; a trailing dot
// allowed). Underscores are accepted, as resolvers do.
// isHostAddr reports whether an interface can have a as its own address:
// not unspecified, multicast, loopback or the IPv4 limited broadcast.
func isHostAddr(a netip.Addr) bool {
	return !a.IsUnspecified() && !a.IsMulticast() && !a.IsLoopback() && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

func isHostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func (p *parser) wgpioKey(n int, key, v string) {
	w := &p.f.WGPIO
	switch key {
	case "Mode":
		if m, ok := p.oneOf(n, key, v, string(ModeFastPath), string(ModeCompat), string(ModeCompatMQTUN)); ok {
			w.Mode = Mode(m)
		}
	case "AddressMode":
		if m, ok := p.oneOf(n, key, v, string(AddressShared), string(AddressOwned)); ok {
			w.AddressMode = AddressMode(m)
		}
	case "XDPMode":
		if m, ok := p.oneOf(n, key, v, string(XDPAuto), string(XDPNative), string(XDPGeneric)); ok {
			w.XDPMode = XDPMode(m)
		}
	case "WAN", "LAN":
		if !isIfName(v) {
			p.errorf(n, key, "%s is not an interface name (1-15 bytes, no '/' or spaces)", quoteShort(v))
			return
		}
		if key == "WAN" {
			w.WAN = v
		} else {
			w.LAN = v
		}
	case "WANVLAN", "LANVLAN":
		id, ok := p.number(n, key, v, 1, MaxVLANID, " (an IEEE 802.1Q VLAN identifier; leave the key out for untagged frames)")
		if !ok {
			return
		}
		if key == "WANVLAN" {
			w.WANVLAN = uint16(id)
		} else {
			w.LANVLAN = uint16(id)
		}
	case "Queues":
		if q, ok := p.number(n, key, v, 1, MaxQueues, ""); ok {
			w.Queues = q
		}
	case "CPUs":
		p.cpus(n, v)
	case "HandshakeWorkers":
		if q, ok := p.number(n, key, v, 1, MaxHandshakeWorkers, ""); ok {
			w.HandshakeWorkers = q
		}
	case "SourcePorts":
		lo, hi, isRange := strings.Cut(v, "-")
		first, ok := p.port(n, key, strings.TrimSpace(lo))
		if !ok {
			return
		}
		last := first
		if isRange {
			if last, ok = p.port(n, key, strings.TrimSpace(hi)); !ok {
				return
			}
			if last < first {
				p.errorf(n, key, "range %s runs backwards; want first-last, as in 51820-51835", quoteShort(v))
				return
			}
		}
		w.SourcePorts = PortRange{First: first, Last: last}
	case "WANAddress", "LANAddress":
		pf, ok := parseCIDR(v, false)
		if !ok {
			p.errorf(n, key, "%s is not a CIDR like 198.18.0.2/24", quoteShort(v))
			return
		}
		// The gateway answers ARP/NDP for it and sends from it: the
		// ARP responder refused a multicast one only at start, without
		// the line, and took a loopback one.
		if !isHostAddr(pf.Addr()) || pf.Addr().Is4In6() {
			p.errorf(n, key, "%s is not a unicast address this interface can have (write its own address, as in 198.18.0.2/24)", quoteShort(v))
			return
		}
		if key == "WANAddress" {
			w.WANAddress = pf
		} else {
			w.LANAddress = pf
		}
	case "Gateway":
		a, err := netip.ParseAddr(v)
		if err != nil || a.Zone() != "" || !a.IsValid() {
			p.errorf(n, key, "%s is not an IP address", quoteShort(v))
			return
		}
		if a = a.Unmap(); !isHostAddr(a) {
			p.errorf(n, key, "%s is not a unicast address a router can have", quoteShort(v))
			return
		}
		w.Gateway = a
	case "MetricsAddress":
		host, port, err := net.SplitHostPort(v)
		if err != nil {
			p.errorf(n, key, "%s is not host:port", quoteShort(v))
			return
		}
		if _, ok := p.port(n, key, port); !ok {
			return
		}
		if host != "" && !isHostName(host) {
			if _, err := netip.ParseAddr(host); err != nil {
				p.errorf(n, key, "%s is not an IP address or a host name", quoteShort(host))
				return
			}
		}
		w.MetricsAddress = v
	case "MetricsPeers":
		if strings.EqualFold(v, "off") {
			w.MetricsPeers = Off
		} else if x, ok := p.number(n, key, v, 1, MaxMetricsPeers, ` of peers or "off"`); ok {
			w.MetricsPeers = x
		}
	case "MSSClamp":
		switch {
		case strings.EqualFold(v, "auto"):
			w.MSSClamp = MSSClampAuto
		case strings.EqualFold(v, "off"):
			w.MSSClamp = MSSClampOff
		default:
			if x, ok := p.number(n, key, v, MinMSSClamp, MaxMSSClamp, ` of bytes, "auto" or "off"`); ok {
				w.MSSClamp = x
			}
		}
	case "ReplayWindow":
		switch {
		case strings.EqualFold(v, "auto"):
			w.ReplayWindow = ReplayWindowAuto
		case v == "8128":
			w.ReplayWindow = ReplayWindowNarrow
		case v == "131008":
			w.ReplayWindow = ReplayWindowWide
		default:
			p.errorf(n, key, `%s is not "auto", 8128 or 131008 (counters)`, quoteShort(v))
		}
	case "ICMPRate":
		if strings.EqualFold(v, "off") {
			w.ICMPRate = Off
		} else if x, ok := p.number(n, key, v, 1, 1000000, ` of messages per second or "off"`); ok {
			w.ICMPRate = x
		}
	case "ICMPBurst":
		if x, ok := p.number(n, key, v, 1, 1000000, " of messages"); ok {
			w.ICMPBurst = x
		}
	case "ICMPDestInterval":
		if strings.EqualFold(v, "off") {
			w.ICMPDestInterval = Off
		} else if x, ok := p.number(n, key, v, 1, 3600000, ` of milliseconds or "off"`); ok {
			w.ICMPDestInterval = time.Duration(x) * time.Millisecond
		}
	}
}

func (p *parser) cpus(n int, v string) {
	const key = "CPUs"
	var set [MaxCPU + 1]bool
	var out []int
	for _, item := range splitList(v) {
		lo, hi, isRange := strings.Cut(item, "-")
		a, okA := digits(strings.TrimSpace(lo))
		b, okB := a, true
		if isRange {
			b, okB = digits(strings.TrimSpace(hi))
		}
		if !okA || !okB || b < a {
			p.errorf(n, key, "%s is not a CPU list like 0-1,3", quoteShort(item))
			return
		}
		if b > MaxCPU {
			p.errorf(n, key, "CPU %d out of range 0-%d", b, MaxCPU)
			return
		}
		for c := a; c <= b; c++ {
			if set[c] {
				p.errorf(n, key, "CPU %d listed twice", c)
				return
			}
			set[c] = true
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		p.errorf(n, key, "empty CPU list")
		return
	}
	p.f.WGPIO.CPUs = out
}

// isIfName reports whether s can be a Linux interface name (dev_valid_name:
// 1 to IFNAMSIZ-1 = 15 bytes, not "." or "..", no '/', ':' or white space).
func isIfName(s string) bool {
	if s == "" || len(s) > 15 || s == "." || s == ".." {
		return false
	}
	return !strings.ContainsAny(s, "/: \t\n\r\v\f")
}
