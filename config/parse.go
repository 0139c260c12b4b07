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
	// MaxHandshakeWorkers is the largest HandshakeWorkers accepted.
	MaxHandshakeWorkers = 1024
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
	// first one is used. It is called once per Endpoint written as a host
	// name, from the goroutine calling Parse. Nil means DefaultResolve,
	// called once per name, the file's names looked up at once
	// (MaxResolving at a time) once the file is read: a file of 20
	// peers' names on a resolver that does not answer took 20 ×
	// ResolveTimeout, one after another.
	Resolve func(host string) ([]netip.Addr, error)
}

// MaxResolving is how many host names the default resolver looks up at
// once for one file (our choice).
const MaxResolving = 16

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
// A regular file that changed while it was read (its size or modification
// time after the read not those of before: an editor saving in place, as
// nano does, when a reload's SIGHUP came) is read again, up to loadTries
// times in all, loadSettle apart: what was read may be a cut file, which
// parses as a valid one with fewer peers, or with an AllowedIPs cut short
// (10.8.0.2/3 of 10.8.0.2/32, taken with a host-bits warning).
func (o Options) Load(path string) (*File, error) {
	for try := 1; ; try++ {
		f, changed, err := o.loadOnce(path)
		if !changed {
			return f, err
		}
		if try == loadTries {
			return nil, fmt.Errorf("load config: %s changed while it was read, %d times: read it again once it is saved", path, loadTries)
		}
		time.Sleep(loadSettle)
	}
}

// loadTries and loadSettle bound Load's reads of a file that keeps
// changing.
const (
	loadTries  = 5
	loadSettle = 100 * time.Millisecond
)

// afterRead, when set (tests), runs between loadOnce's read of path and
// its second look at the file.
var afterRead func(path string)

// loadOnce is one read of Load: the file parsed, and whether it changed
// while it was read (a regular file's size or modification time).
func (o Options) loadOnce(path string) (_ *File, changed bool, _ error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, false, fmt.Errorf("load config: %w", err)
	}
	defer fd.Close()
	before, err := fd.Stat()
	if err == nil && before.IsDir() {
		// Read would fail with EISDIR, reported as line 1 of the file.
		return nil, false, fmt.Errorf("load config: %s is a directory, not a configuration file", path)
	}
	f, perr := o.Parse(path, fd)
	if afterRead != nil {
		afterRead(path)
	}
	if err == nil && before.Mode().IsRegular() {
		if after, err := fd.Stat(); err == nil && (after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime())) {
			if f != nil {
				f.Interface.PrivateKey.Zero() // not returned: its caller cannot
			}
			return nil, true, nil
		}
	}
	return f, false, perr
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
	p.deferResolve = p.opts.Resolve == nil
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
		if _, rest, ok := strings.Cut(text, "\r"); ok && strings.TrimSpace(rest) != "" {
			// bufio.ScanLines ends lines at LF (dropping a CR before it):
			// a file whose lines end in CR alone is one line.
			p.errorf(n, "", "a carriage return (CR) inside the line, with more after it: lines that end in CR alone (classic Mac OS) are not line ends here; save the file with LF (or CRLF) line ends")
			if n == 1 {
				return nil, joinErrors(p.errs)
			}
			continue
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
			p.errs = append(p.errs, &Error{File: name, Line: n + 1, Msg: fmt.Sprintf("line longer than %d bytes (a long AllowedIPs or Address list can be split over several lines: they add up)", MaxLine)})
		} else {
			p.errs = append(p.errs, &Error{File: name, Line: n + 1, Msg: "read: " + err.Error(), Err: err})
		}
		return nil, joinErrors(p.errs)
	}
	p.endSection()
	p.resolvePending()
	p.finish()
	p.summarizeWarnings()
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
	// why is what the warning about an unused key says, after
	// "ignored: ": what wg-quick does with it that wgpio does not, and
	// what to do instead.
	why string
	// hook is the systemd unit directive that runs a wg-quick hook's
	// command at the same moment (the warning's why is hookWhy's).
	hook string
}

// keys lists every key in every section, in the documentation's spelling.
var keys = []keyInfo{
	{name: "PrivateKey", sec: secInterface},
	{name: "ListenPort", sec: secInterface},
	{name: "Address", sec: secInterface, repeat: true},
	{name: "MTU", sec: secInterface},
	{name: "DNS", sec: secInterface, unused: true, why: "wgpio sets no DNS resolver (wg-quick calls resolvconf); set the host's resolver yourself"},
	{name: "Table", sec: secInterface, unused: true, why: "wgpio routes by the peers' AllowedIPs itself whatever Table says (off does not stop it, a table number puts no routes in that table); add policy routing yourself"},
	{name: "PreUp", sec: secInterface, unused: true, hook: "ExecStartPre="},
	{name: "PostUp", sec: secInterface, unused: true, hook: "ExecStartPost="},
	{name: "PreDown", sec: secInterface, unused: true, hook: "ExecStop="},
	{name: "PostDown", sec: secInterface, unused: true, hook: "ExecStopPost="},
	{name: "SaveConfig", sec: secInterface, unused: true, why: "wgpio never writes the file (wg-quick saves the device's state at down); what wg set changes lasts until the next start unless you put it in the file"},
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
	{name: "HandshakeWorkers", sec: secWGPIO},
	{name: "SourcePorts", sec: secWGPIO},
	{name: "WANAddress", sec: secWGPIO},
	{name: "LANAddress", sec: secWGPIO},
	{name: "Gateway", sec: secWGPIO},
	{name: "XDPMode", sec: secWGPIO},
	{name: "MetricsAddress", sec: secWGPIO},
	{name: "MetricsPeers", sec: secWGPIO},
	{name: "MSSClamp", sec: secWGPIO},
	{name: "ICMPRate", sec: secWGPIO},
	{name: "ICMPBurst", sec: secWGPIO},
	{name: "ICMPDestInterval", sec: secWGPIO},
	{name: "ReplayWindow", sec: secWGPIO},
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
	pubLines       []int                // line of each peer's PublicKey (parallel to f.Peers)
	warned         map[string]*warnKind // warnf's format → its count
	warnOrder      []string             // the formats of warned, in the order first seen

	// deferResolve: Endpoint host names are looked up with DefaultResolve
	// once the file is read (resolvePending), not as they are met.
	deferResolve bool
	pending      []pendingEndpoint
}

func (p *parser) errorf(line int, key, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.f.Name, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// warnf adds a Warning, unless MaxWarningsPerKind of its kind (its
// format) are listed already: then it is only counted (summarizeWarnings).
func (p *parser) warnf(line int, key, format string, args ...any) {
	k := p.warned[format]
	if k == nil {
		if p.warned == nil {
			p.warned = map[string]*warnKind{}
		}
		k = &warnKind{first: len(p.f.Warnings)}
		p.warned[format] = k
		p.warnOrder = append(p.warnOrder, format)
	}
	k.n++
	if k.n > MaxWarningsPerKind {
		return
	}
	p.f.Warnings = append(p.f.Warnings, Warning{File: p.f.Name, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// MaxWarningsPerKind is how many warnings of one kind (one message, such
// as "[Peer] has no AllowedIPs", whatever its line or values) Parse lists
// one by one; the others of the kind are counted in one Warning after all
// the listed ones (Warning.More). A file of 50,000 peers without
// AllowedIPs otherwise logged 50,000 lines at every start.
const MaxWarningsPerKind = 10

// warnKind counts the warnings of one kind: n in all, the first at
// p.f.Warnings[first].
type warnKind struct{ n, first int }

// summarizeWarnings adds, per kind with more than MaxWarningsPerKind
// warnings, one that says how many more there were.
func (p *parser) summarizeWarnings() {
	for _, format := range p.warnOrder {
		k := p.warned[format]
		if k.n <= MaxWarningsPerKind {
			continue
		}
		w := p.f.Warnings[k.first]
		more := k.n - MaxWarningsPerKind
		p.f.Warnings = append(p.f.Warnings, Warning{File: w.File, Key: w.Key, More: more,
			Msg: fmt.Sprintf("%d more warnings of this kind, not listed (%d in all; the first %d are above, the first at line %d: %s)", more, k.n, MaxWarningsPerKind, w.Line, w.Msg)})
	}
}

// stripComment removes a comment started by '#' or ';' and the spaces around
// what is left. Neither character occurs in a key, an address or base64.
func stripComment(s string) string {
	if i := strings.IndexAny(s, "#;"); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// semicolonTail returns the comment of raw, trimmed, when a ';' starts
// it after some text (a value), else "".
func semicolonTail(raw string) string {
	i := strings.IndexAny(raw, "#;")
	if i <= 0 || raw[i] != ';' || strings.TrimSpace(raw[:i]) == "" {
		return ""
	}
	return strings.TrimSpace(stripComment(raw[i+1:]))
}

// startsWithPrefix reports whether s begins with an IP address or CIDR
// (up to a comma or a space).
func startsWithPrefix(s string) bool {
	first, _, _ := strings.Cut(s, ",")
	if f := strings.Fields(first); len(f) > 0 {
		_, ok := parseCIDR(f[0], true)
		return ok
	}
	return false
}

func (p *parser) line(n int, raw string) {
	s := stripComment(raw)
	if s == "" {
		return
	}
	tail := semicolonTail(raw)
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
	if ki.name == "FwMark" {
		m, ok := parseFwMark(v)
		if !ok {
			p.errorf(n, ki.name, "%s is not a mark; want off or a number up to 4294967295 (decimal, or hexadecimal with 0x)", quoteShort(v))
			return
		}
		p.f.Interface.FwMark = m
		// No Warning here: whether a mark is acted on depends on the
		// mode, which a later [WGPIO] line or wgpio's -mode flag sets
		// (cmd/wgpio warns of a mark the mode does not carry).
		p.f.Interface.Unused = append(p.f.Interface.Unused, Setting{Line: n, Key: ki.name, Value: v})
		return
	}
	if (ki.name == "AllowedIPs" || ki.name == "Address") && startsWithPrefix(tail) {
		// wg(8) refuses the line ("AllowedIP is not in the correct
		// format"); read as a comment, the prefixes after ';' were
		// dropped without a word.
		p.errorf(n, ki.name, "%s after ';' would not be read: ';' starts a comment; separate several with ','", quoteShort(tail))
		return
	}
	if ki.hook != "" {
		v = hookValue(raw)
	}
	if ki.unused {
		p.f.Interface.Unused = append(p.f.Interface.Unused, Setting{Line: n, Key: ki.name, Value: v})
		if ki.name == "SaveConfig" && strings.EqualFold(v, "false") {
			// What wgpio does anyway (it never writes the file), as
			// wg-quick's read_bool takes it: nothing to warn of.
			return
		}
		why := ki.why
		if ki.hook != "" {
			why = hookWhy(ki.hook, v)
		}
		p.warnf(n, ki.name, "ignored: %s", why)
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
		p.errorf(n, "", "unknown section [%s]; want [Interface], [Peer] or [WGPIO]", shownSection(name))
	}
}

// shownSection is an unknown section's name as its error shows it:
// "(a key)" when it holds a key's run of base64 (a key pasted between
// brackets, or a "[PrivateKey = ...]" line), since no message holds a key
// (Error; cut to 40 bytes, as names were, it showed 40 of a key's 44
// characters, 240 of its 256 bits), and not at all when it is not a plain
// name (plainName): a key cut short or with a stray character in it is no
// run of 43.
func shownSection(name string) string {
	if looksLikeKey(name) {
		return "(a key)"
	}
	if !plainName(name) {
		return "(not shown: not a plain name, and it may hold a key)"
	}
	return name
}

// plainName reports whether s is at most 32 letters, digits, spaces, '_',
// '-' or '.': what a section's name, misspelt, is made of.
func plainName(s string) bool { return plainOf(s, " _-.") }

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

// hookKeyHint is what the error of an [Interface] without a PrivateKey
// adds when a hook of wg-quick's sets the key instead (PostUp = wg set %i
// private-key /etc/wireguard/wg0.key, a common way to keep the key out of
// the file): wgpio runs no hook, so the key must be in the file.
func (p *parser) hookKeyHint() string {
	for _, u := range p.f.Interface.Unused {
		if strings.HasSuffix(u.Key, "Up") && strings.Contains(u.Value, "private-key") {
			return fmt.Sprintf(": the %s at line %d that sets it is not run (wgpio runs no commands); write the key in the file, PrivateKey = <the key's base64>, and keep the file from other users (chmod 0600, or 0640 for the unit's group)", u.Key, u.Line)
		}
	}
	return ""
}

// finish checks what can be checked only at the end of the file.
func (p *parser) finish() {
	if p.ifLine == 0 {
		p.errorf(0, "", "no [Interface] section")
	} else if _, ok := p.ifSeen["PrivateKey"]; !ok {
		p.errorf(p.ifLine, "", "[Interface] has no PrivateKey%s", p.hookKeyHint())
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
		v6Addr := false
		for _, a := range in.Addresses {
			if a.Addr().Is6() && !a.Addr().Is4In6() {
				p.errorf(p.ifSeen["MTU"], "MTU", "%d is below %d, IPv6's minimum (RFC 8200 section 5), with IPv6 Address %s", in.MTU, MinIPv6MTU, a)
				v6Addr = true
				break
			}
		}
		// Without an IPv6 address the IPv6 prefixes are not carried at
		// all. Linux disables IPv6 on a wg0 below 1280 (no IPv6 route
		// goes through it), and so do the fast path and compat mode
		// (fastpath.DropIPv6Off, tundev.PortDropIPv6Off): carried, IPv6
		// would stall, since a host told "packet too big" with less
		// than 1280 keeps sending 1280-byte packets (RFC 8201 section 4,
		// RFC 8021), which are refused again.
	peers:
		for i := range p.f.Peers {
			for _, a := range p.f.Peers[i].AllowedIPs {
				if v6Addr || !a.Addr().Is6() {
					continue
				}
				what := "the tunnel carries no IPv6 at all, as a Linux wg0 with this MTU carries none " +
					"(a LAN host's IPv6 packet to them is answered no route, a peer's dropped: drops ipv6_off)"
				if p.f.WGPIO.Mode == ModeCompatMQTUN {
					what = "the kernel turns IPv6 off on a TUN of this MTU and refuses the IPv6 routes into it, which stops wgpio up, as wg-quick up"
				}
				p.warnf(p.ifSeen["MTU"], "MTU", "%d is below %d, IPv6's minimum (RFC 8200 section 5), and a peer's AllowedIPs hold %s: "+
					"%s; raise the MTU to %d or drop the IPv6 prefixes", in.MTU, MinIPv6MTU, a, what, MinIPv6MTU)
				break peers
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
	if w.Gateway.IsValid() && w.WANAddress.IsValid() && w.Gateway == w.WANAddress.Addr() {
		p.errorf(p.ioSeen["Gateway"], "Gateway", "%s is WANAddress itself; the Gateway is the next router on the WAN", w.Gateway)
	} else if w.Gateway.IsValid() && w.WANAddress.IsValid() && !w.Gateway.IsLinkLocalUnicast() {
		if w.Gateway.Is4() != w.WANAddress.Addr().Is4() || !w.WANAddress.Masked().Contains(w.Gateway) {
			p.errorf(p.ioSeen["Gateway"], "Gateway", "%s is not in WANAddress %s", w.Gateway, w.WANAddress)
		}
	}
}
