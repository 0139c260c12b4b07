package config

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wgpio/wgpio/noise"
)

// Limits of values, spec constants apart from our choices.
const (
	// MinMTU is the smallest MTU accepted: IPv4's minimum datagram a link
	// must carry (RFC 791, "Fragmentation": 68 octets), the kernel
	// WireGuard device's min_mtu (ETH_MIN_MTU).
	MinMTU = 68
	// MinIPv6MTU is IPv6's minimum link MTU (RFC 8200 section 5), required
	// when the interface has an IPv6 Address.
	MinIPv6MTU = 1280
	// MaxMTU is the largest MTU accepted (an IP datagram's 16-bit length).
	MaxMTU = 65535
	// MaxQueues is the largest Queues accepted: the most queues a Linux
	// TUN device takes (MAX_TAP_QUEUES, compat-mqtun) and the most
	// workers of the fast path.
	MaxQueues = 256
	// MinMSSClamp and MaxMSSClamp bound a numeric MSSClamp: the smallest
	// MSS every IPv4 host accepts (RFC 879) and the largest a 65535-byte
	// IPv4 packet holds.
	MinMSSClamp = 536
	MaxMSSClamp = 65495
	// MaxVLANID is the largest WANVLAN or LANVLAN accepted (IEEE 802.1Q
	// §9.6: VID 4095 is reserved, 0 means no VLAN).
	MaxVLANID = 4094
	// MaxCPU is the largest CPU number accepted (Linux's largest NR_CPUS, 8192).
	MaxCPU = 8191
	// MaxLine is the longest line accepted, in bytes (our choice).
	MaxLine = 64 << 10
	// ResolveTimeout bounds the default resolver's lookup of one host name.
	ResolveTimeout = 10 * time.Second
)

// Options changes how a file is parsed. The zero value is ready to use.
type Options struct {
	// Resolve returns the addresses of a host name met in an Endpoint; the
	// first one is used. Nil means DefaultResolve. It is called once per
	// Endpoint written as a host name, from the goroutine calling Parse.
	Resolve func(host string) ([]netip.Addr, error)
}

// DefaultResolve looks host up with net.DefaultResolver (the system's
// resolver), IPv4 and IPv6, within ResolveTimeout.
func DefaultResolve(host string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ResolveTimeout)
	defer cancel()
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// Parse reads a configuration file from r with the zero Options. name is used
// only in messages (File.Name, Error.File, Warning.File).
func Parse(name string, r io.Reader) (*File, error) { return Options{}.Parse(name, r) }

// Load reads the configuration file at path with the zero Options.
func Load(path string) (*File, error) { return Options{}.Load(path) }

// Load reads the configuration file at path; path is the name in messages.
func (o Options) Load(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	defer fd.Close()
	return o.Parse(path, fd)
}

// Parse reads a whole configuration file from r and checks it. On success it
// returns the File and a nil error. Otherwise it returns a nil File and every
// problem found: one *Error, or an errors.Join of *Error values in file
// order (problems found after the last line, such as a missing key, come
// last). See Error for the message format.
func (o Options) Parse(name string, r io.Reader) (*File, error) {
	p := parser{
		opts:      o,
		f:         &File{Name: name},
		section:   secNone,
		ifSeen:    map[string]int{},
		ioSeen:    map[string]int{},
		allowedAt: map[netip.Prefix]int{},
		pubs:      map[noise.PublicKey]int{},
	}
	if p.opts.Resolve == nil {
		p.opts.Resolve = DefaultResolve
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxLine)
	n := 0
	for sc.Scan() {
		n++
		text := sc.Text()
		if n == 1 {
			switch {
			case strings.HasPrefix(text, "\ufeff"):
				// A byte-order mark some editors write: not part of the
				// first line.
				text = text[len("\ufeff"):]
				p.warnf(1, "", "the file starts with a UTF-8 byte-order mark, skipped")
			case strings.HasPrefix(text, "\xff\xfe") || strings.HasPrefix(text, "\xfe\xff"):
				p.errs = append(p.errs, &Error{File: name, Line: 1, Msg: "the file is UTF-16 text; save it as UTF-8"})
				return nil, joinErrors(p.errs)
			}
		}
		p.line(n, text)
		if len(p.errs) >= MaxErrors {
			// Not a configuration file: stop reading (a 50 MB file of
			// garbage must not cost gigabytes of error values).
			p.errs = append(p.errs, &Error{File: name, Line: n, Msg: fmt.Sprintf("too many errors (%d); stopped reading", MaxErrors)})
			return nil, joinErrors(p.errs)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			p.errs = append(p.errs, &Error{File: name, Line: n + 1, Msg: fmt.Sprintf("line longer than %d bytes", MaxLine)})
		} else {
			p.errs = append(p.errs, &Error{File: name, Line: n + 1, Msg: "read: " + err.Error(), Err: err})
		}
		return nil, joinErrors(p.errs)
	}
	p.endSection()
	p.finish()
	if len(p.errs) > 0 {
		return nil, joinErrors(p.errs)
	}
	p.f.Interface.Lines, p.f.WGPIO.Lines = p.ifSeen, p.ioSeen
	return p.f, nil
}

// MaxErrors is how many problems Parse reports before it stops reading.
const MaxErrors = 50

// joinErrors returns the one error of errs, or errors.Join of them all.
func joinErrors(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

type section int

const (
	secNone section = iota
	secInterface
	secPeer
	secWGPIO
	secSkip // a section already reported as bad: its keys are skipped
)

var sectionNames = [...]string{secNone: "", secInterface: "Interface", secPeer: "Peer", secWGPIO: "WGPIO", secSkip: ""}

type keyInfo struct {
	name   string
	sec    section
	repeat bool // the values of repeated lines add up
	unused bool // accepted, kept, warned about, not acted on
}

// keys lists every key in every section, in the documentation's spelling.
var keys = []keyInfo{
	{name: "PrivateKey", sec: secInterface},
	{name: "ListenPort", sec: secInterface},
	{name: "Address", sec: secInterface, repeat: true},
	{name: "MTU", sec: secInterface},
	{name: "DNS", sec: secInterface, unused: true},
	{name: "Table", sec: secInterface, unused: true},
	{name: "PreUp", sec: secInterface, unused: true},
	{name: "PostUp", sec: secInterface, unused: true},
	{name: "PreDown", sec: secInterface, unused: true},
	{name: "PostDown", sec: secInterface, unused: true},
	{name: "SaveConfig", sec: secInterface, unused: true},
	{name: "FwMark", sec: secInterface, unused: true},

	{name: "PublicKey", sec: secPeer},
	{name: "PresharedKey", sec: secPeer},
	{name: "AllowedIPs", sec: secPeer, repeat: true},
	{name: "Endpoint", sec: secPeer},
	{name: "PersistentKeepalive", sec: secPeer},

	{name: "Mode", sec: secWGPIO},
	{name: "WAN", sec: secWGPIO},
	{name: "LAN", sec: secWGPIO},
	{name: "WANVLAN", sec: secWGPIO},
	{name: "LANVLAN", sec: secWGPIO},
	{name: "AddressMode", sec: secWGPIO},
	{name: "Queues", sec: secWGPIO},
	{name: "CPUs", sec: secWGPIO},
	{name: "SourcePorts", sec: secWGPIO},
	{name: "WANAddress", sec: secWGPIO},
	{name: "LANAddress", sec: secWGPIO},
	{name: "Gateway", sec: secWGPIO},
	{name: "XDPMode", sec: secWGPIO},
	{name: "MetricsAddress", sec: secWGPIO},
	{name: "MSSClamp", sec: secWGPIO},
	{name: "ICMPRate", sec: secWGPIO},
	{name: "ICMPBurst", sec: secWGPIO},
	{name: "ICMPDestInterval", sec: secWGPIO},
}

type parser struct {
	opts    Options
	f       *File
	errs    []error
	section section
	secLine int // line of the current section's header

	ifLine, ioLine int                  // lines of the [Interface] and [WGPIO] headers; 0: none yet
	ifSeen, ioSeen map[string]int       // key → first line, in [Interface] and [WGPIO]
	allowedAt      map[netip.Prefix]int // AllowedIPs prefix → line of the [Peer] that has it
	peerSeen       map[string]int       // key → first line, in the current [Peer]
	pubs           map[noise.PublicKey]int
	pubLines       []int // line of each peer's PublicKey (parallel to f.Peers)
}

func (p *parser) errorf(line int, key, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.f.Name, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) warnf(line int, key, format string, args ...any) {
	p.f.Warnings = append(p.f.Warnings, Warning{File: p.f.Name, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// stripComment removes a comment started by '#' or ';' and the spaces around
// what is left. Neither character occurs in a key, an address or base64.
func stripComment(s string) string {
	if i := strings.IndexAny(s, "#;"); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func (p *parser) line(n int, raw string) {
	s := stripComment(raw)
	if s == "" {
		return
	}
	if s[0] == '[' {
		p.header(n, s)
		return
	}
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		p.errorf(n, "", "%s: want \"Key = Value\" or a [Section] header", quoteShort(s))
		return
	}
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	if k == "" {
		p.errorf(n, "", "%s: no key before '='", quoteShort(s))
		return
	}
	if p.section == secSkip {
		return
	}
	if !isKeyName(k) {
		p.errorf(n, "", "%s is not a key name; want \"Key = Value\" or a [Section] header", quoteShort(k))
		return
	}
	if p.section == secNone {
		p.errorf(n, k, "outside any section; put it under [Interface], [Peer] or [WGPIO]")
		return
	}
	ki, ok := lookupKey(p.section, k)
	if !ok {
		p.unknownKey(n, k)
		return
	}
	seen := p.seenMap()
	if first, dup := seen[ki.name]; dup && !ki.repeat && !ki.unused {
		p.errorf(n, ki.name, "repeated; first set at line %d", first)
		return
	} else if !dup {
		seen[ki.name] = n
	}
	if v == "" && !ki.repeat && !ki.unused {
		p.errorf(n, ki.name, "empty value")
		return
	}
	if ki.unused {
		p.f.Interface.Unused = append(p.f.Interface.Unused, Setting{Line: n, Key: ki.name, Value: v})
		p.warnf(n, ki.name, "ignored: wgpio does not act on it")
		return
	}
	switch p.section {
	case secInterface:
		p.interfaceKey(n, ki.name, v)
	case secPeer:
		p.peerKey(n, ki.name, v)
	case secWGPIO:
		p.wgpioKey(n, ki.name, v)
	}
}

func (p *parser) seenMap() map[string]int {
	switch p.section {
	case secInterface:
		return p.ifSeen
	case secPeer:
		return p.peerSeen
	default:
		return p.ioSeen
	}
}

func lookupKey(sec section, k string) (keyInfo, bool) {
	for _, ki := range keys {
		if ki.sec == sec && strings.EqualFold(ki.name, k) {
			return ki, true
		}
	}
	return keyInfo{}, false
}

// unknownKey reports a key the current section does not have, with the
// section it belongs to or the nearest known key (edit distance at most 2).
func (p *parser) unknownKey(n int, k string) {
	sec := sectionNames[p.section]
	for _, ki := range keys {
		if strings.EqualFold(ki.name, k) {
			p.errorf(n, k, "unknown key in [%s]; it belongs in [%s]", sec, sectionNames[ki.sec])
			return
		}
	}
	best, bestD := "", 3
	if len(k) <= 64 {
		lk := strings.ToLower(k)
		for _, ki := range keys {
			if ki.sec != p.section {
				continue
			}
			if d := editDistance(lk, strings.ToLower(ki.name)); d < bestD {
				best, bestD = ki.name, d
			}
		}
	}
	if best != "" {
		p.errorf(n, k, "unknown key in [%s]; did you mean %q?", sec, best)
		return
	}
	p.errorf(n, k, "unknown key in [%s]", sec)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// quoteShort quotes s for a message, cut to 40 bytes. Anything shaped like a
// base64 key (44 characters ending in '=') is replaced by "(a key)": it may be
// a private key pasted into the wrong line, and keys never reach messages.
func quoteShort(s string) string {
	if looksLikeKey(s) {
		return "(a key)"
	}
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "..."
	}
	return strconv.Quote(s)
}

// looksLikeKey reports whether s holds a run of 43 or more base64 characters,
// the length of a 32-byte key's base64 form without its padding.
func looksLikeKey(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '/' {
			if run++; run >= 43 {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// isKeyName reports whether k can be echoed in a message as a key name: at
// most 32 letters, digits, '_' or '-'. Anything else may be key material
// pasted on a line of its own.
func isKeyName(k string) bool {
	if len(k) > 32 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (p *parser) header(n int, s string) {
	if s[len(s)-1] != ']' || strings.Count(s, "[") != 1 || strings.Count(s, "]") != 1 {
		p.errorf(n, "", "malformed section header %s; want [Interface], [Peer] or [WGPIO]", quoteShort(s))
		p.endSection()
		p.section, p.secLine = secSkip, n
		return
	}
	p.endSection()
	name := strings.TrimSpace(s[1 : len(s)-1])
	sec := secSkip
	for i, sn := range sectionNames {
		if sn != "" && strings.EqualFold(sn, name) {
			sec = section(i)
		}
	}
	p.section, p.secLine = sec, n
	switch sec {
	case secInterface:
		if p.ifLine != 0 {
			p.errorf(n, "", "repeated [Interface] section; first at line %d", p.ifLine)
			p.section = secSkip
			return
		}
		p.ifLine = n
	case secWGPIO:
		if p.ioLine != 0 {
			p.errorf(n, "", "repeated [WGPIO] section; first at line %d", p.ioLine)
			p.section = secSkip
			return
		}
		p.ioLine = n
	case secPeer:
		p.f.Peers = append(p.f.Peers, Peer{Line: n})
		p.pubLines = append(p.pubLines, 0)
		p.peerSeen = map[string]int{}
	default:
		p.section = secSkip
		p.errorf(n, "", "unknown section [%s]; want [Interface], [Peer] or [WGPIO]", truncate(name, 40))
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// endSection checks what can be checked only at the end of a section.
func (p *parser) endSection() {
	if p.section != secPeer {
		return
	}
	peer := &p.f.Peers[len(p.f.Peers)-1]
	if _, ok := p.peerSeen["PublicKey"]; !ok {
		p.errorf(peer.Line, "", "[Peer] has no PublicKey")
	}
	if len(peer.AllowedIPs) == 0 {
		p.warnf(peer.Line, "", "[Peer] has no AllowedIPs; no traffic will pass to or from it")
	}
}

// finish checks what can be checked only at the end of the file.
func (p *parser) finish() {
	if p.ifLine == 0 {
		p.errorf(0, "", "no [Interface] section")
	} else if _, ok := p.ifSeen["PrivateKey"]; !ok {
		p.errorf(p.ifLine, "", "[Interface] has no PrivateKey")
	} else if !p.f.Interface.PrivateKey.IsZero() {
		own := p.f.Interface.PrivateKey.PublicKey()
		for i := range p.f.Peers {
			if p.pubLines[i] != 0 && p.f.Peers[i].PublicKey.Equal(&own) {
				p.errorf(p.pubLines[i], "PublicKey", "the interface's own public key; a peer cannot be this interface")
			}
		}
	}
	in := &p.f.Interface
	if in.MTU != 0 && in.MTU < MinIPv6MTU {
		for _, a := range in.Addresses {
			if a.Addr().Is6() && !a.Addr().Is4In6() {
				p.errorf(p.ifSeen["MTU"], "MTU", "%d is below %d, IPv6's minimum (RFC 8200 section 5), with IPv6 Address %s", in.MTU, MinIPv6MTU, a)
				break
			}
		}
	}
	w := &p.f.WGPIO
	if w.AddressMode == AddressOwned {
		var missing []string
		// A key set to a bad value was reported where it stands.
		if _, set := p.ioSeen["WANAddress"]; !set {
			missing = append(missing, "WANAddress")
		}
		if _, set := p.ioSeen["LANAddress"]; !set {
			missing = append(missing, "LANAddress")
		}
		if len(missing) > 0 {
			p.errorf(p.ioSeen["AddressMode"], "AddressMode", "owned needs %s", strings.Join(missing, " and "))
		}
	} else {
		for _, k := range []string{"WANAddress", "LANAddress", "Gateway"} {
			if line, ok := p.ioSeen[k]; ok {
				p.errorf(line, k, "used only with AddressMode = owned")
			}
		}
	}
	if w.Gateway.IsValid() && w.WANAddress.IsValid() && !w.Gateway.IsLinkLocalUnicast() {
		if w.Gateway.Is4() != w.WANAddress.Addr().Is4() || !w.WANAddress.Masked().Contains(w.Gateway) {
			p.errorf(p.ioSeen["Gateway"], "Gateway", "%s is not in WANAddress %s", w.Gateway, w.WANAddress)
		}
	}
}

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
			if pf, ok := p.prefix(n, key, s); ok {
				in.Addresses = append(in.Addresses, pf)
			}
		}
	case "MTU":
		if m, ok := p.number(n, key, v, MinMTU, MaxMTU, ""); ok {
			in.MTU = m
		}
	}
}

// keyHint adds to a bad key's error when the value looks like a file name:
// wg-quick files hold the key itself.
func keyHint(v string) string {
	if strings.ContainsRune(v, '/') || strings.HasSuffix(v, ".key") {
		return " (the key itself goes here, as `wg genkey` prints it, not the name of a file holding it)"
	}
	return ""
}

func (p *parser) peerKey(n int, key, v string) {
	peer := &p.f.Peers[len(p.f.Peers)-1]
	switch key {
	case "PublicKey":
		k, err := noise.ParsePublicKey(v)
		if err != nil {
			p.errorf(n, key, "not a base64 32-byte key")
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
			}
			p.allowedAt[pf] = peer.Line
			peer.AllowedIPs = append(peer.AllowedIPs, pf)
		}
	case "Endpoint":
		p.endpoint(n, peer, v)
	case "PersistentKeepalive":
		if strings.EqualFold(v, "off") {
			peer.PersistentKeepalive = 0
			return
		}
		if s, ok := p.number(n, key, v, 0, 65535, ` of seconds or "off"`); ok {
			peer.PersistentKeepalive = uint16(s)
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
		if a = a.Unmap(); a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
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
	addrs, err := p.opts.Resolve(host)
	if err != nil {
		p.errs = append(p.errs, &Error{File: p.f.Name, Line: n, Key: key, Msg: fmt.Sprintf("resolve %q: %v", host, err), Err: err})
		return
	}
	for _, a := range addrs {
		if a.IsValid() {
			peer.Endpoint = netip.AddrPortFrom(a.Unmap(), pn)
			peer.EndpointHost = host
			return
		}
	}
	p.errorf(n, key, "resolve %q: no addresses", host)
}

// isHostName reports whether s is a syntactically valid DNS host name (RFC
// 1123 section 2.1: labels of letters, digits and hyphens, not starting or
// ending with a hyphen, at most 63 bytes each and 253 in all; a trailing dot
// allowed). Underscores are accepted, as resolvers do.
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
		w.Gateway = a.Unmap()
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

func (p *parser) oneOf(n int, key, v string, choices ...string) (string, bool) {
	for _, c := range choices {
		if strings.EqualFold(c, v) {
			return c, true
		}
	}
	p.errorf(n, key, "%s is not one of %s", quoteShort(v), strings.Join(choices, ", "))
	return "", false
}

// digits parses a decimal number of at most 9 digits (no sign, no spaces).
func digits(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	v := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		v = v*10 + int(s[i]-'0')
	}
	return v, true
}

// isDigits reports whether s is a non-empty string of decimal digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// number parses a decimal in [lo, hi]; what describes the unit in the
// "not a number" message.
func (p *parser) number(n int, key, v string, lo, hi int, what string) (int, bool) {
	if !isDigits(v) {
		p.errorf(n, key, "%s is not a number%s", quoteShort(v), what)
		return 0, false
	}
	x, ok := digits(v)
	if !ok || x < lo || x > hi {
		p.errorf(n, key, "%s out of range %d-%d", truncate(v, 20), lo, hi)
		return 0, false
	}
	return x, true
}

// port parses a UDP port, 1-65535.
func (p *parser) port(n int, key, v string) (uint16, bool) {
	if !isDigits(v) {
		p.errorf(n, key, "port %s is not a number", quoteShort(v))
		return 0, false
	}
	x, ok := digits(v)
	if !ok || x < 1 || x > 65535 {
		p.errorf(n, key, "port %s out of range 1-65535", truncate(v, 20))
		return 0, false
	}
	return uint16(x), true
}

// splitList splits a comma list, dropping the spaces around items and empty
// items (wg-quick accepts "a, b," as well as "a,b").
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// parseCIDR parses "addr/bits", or, if bare, a lone address as /32 or /128
// (as wg(8) and wg-quick do). Zones are refused; IPv4-mapped IPv6 addresses
// are kept as written.
// prefix parses an Address or AllowedIPs item (CIDR, or a bare address as
// a host prefix), reporting a bad one.
func (p *parser) prefix(n int, key, s string) (netip.Prefix, bool) {
	pf, ok := parseCIDR(s, true)
	switch {
	case !ok:
		p.errorf(n, key, "%s is not an IP address or CIDR", quoteShort(s))
	case pf.Addr().Is4In6():
		// An IPv4-mapped IPv6 address never appears in an IPv6 header
		// on the wire (RFC 4291 section 2.5.5.2): it would match nothing.
		p.errorf(n, key, "%s is an IPv4-mapped IPv6 address; write the IPv4 address (%s)", quoteShort(s), pf.Addr().Unmap())
		ok = false
	}
	return pf, ok
}

func parseCIDR(s string, bare bool) (netip.Prefix, bool) {
	if strings.Contains(s, "/") {
		pf, err := netip.ParsePrefix(s)
		return pf, err == nil
	}
	if !bare {
		return netip.Prefix{}, false
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, a.BitLen()), true
}
