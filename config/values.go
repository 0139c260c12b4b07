package config

import (
	"net/netip"
	"strconv"
	"strings"
)

// Value parsers shared by the sections: numbers, ports, choices, lists and
// prefixes, each reporting its error against the key and line.

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

// number parses a decimal in [lo, hi]; what describes the value, in both
// messages: after "is not a number" (" of seconds or \"off\"", or " (an
// ...)"), and after the range, so that a key that takes a word too says
// so where a 0 meant to turn it off is refused ("ICMPRate = 0").
func (p *parser) number(n int, key, v string, lo, hi int, what string) (int, bool) {
	if neg, ok := strings.CutPrefix(v, "-"); ok && isDigits(neg) {
		// A number, below every range here ("Queues = -1" said "not a
		// number").
		p.errorf(n, key, "%s out of range %d-%d%s", truncate(v, 20), lo, hi, rangeWhat(what))
		return 0, false
	}
	if !isDigits(v) {
		p.errorf(n, key, "%s is not a number%s", quoteShort(v), what)
		return 0, false
	}
	x, ok := digits(v)
	if !ok || x < lo || x > hi {
		p.errorf(n, key, "%s out of range %d-%d%s", truncate(v, 20), lo, hi, rangeWhat(what))
		return 0, false
	}
	return x, true
}

// rangeWhat is number's what as the out-of-range message ends: " (a
// number of seconds or \"off\")" for " of seconds or \"off\"", a
// parenthesis as it is, nothing for nothing.
func rangeWhat(what string) string {
	if rest, ok := strings.CutPrefix(what, " of "); ok {
		return " (a number of " + rest + ")"
	}
	return what
}

// port parses a UDP port, 1-65535.
func (p *parser) port(n int, key, v string) (uint16, bool) {
	if neg, ok := strings.CutPrefix(v, "-"); ok && isDigits(neg) {
		p.errorf(n, key, "port %s out of range 1-65535", truncate(v, 20))
		return 0, false
	}
	if !isDigits(v) {
		p.errorf(n, key, "port %s is not a number", quoteShort(v))
		return 0, false
	}
	x, ok := digits(v)
	if ok && x == 0 && key == "ListenPort" {
		// wg(8) and wg-quick take 0 for a port the kernel picks.
		p.errorf(n, key, "port 0 out of range 1-65535 (wg(8)'s random port: leave the key out for that in compat-mqtun mode, or for 51820 in fast-path mode; compat mode needs a port named)")
		return 0, false
	}
	if !ok || x < 1 || x > 65535 {
		p.errorf(n, key, "port %s out of range 1-65535", truncate(v, 20))
		return 0, false
	}
	return uint16(x), true
}

// splitList splits a comma list, dropping the spaces around items and empty
// items (wg-quick accepts "a, b," as well as "a,b" for Address, which it
// splits itself; an AllowedIPs list goes to wg(8), which refuses an empty
// item: see emptyItem).
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// emptyItem reports whether the non-empty comma list v has an empty item
// (",," or a ',' at either end, spaces aside), and where, for an error:
// "after X" or "before X", X the item next to the first empty one.
func emptyItem(v string) (string, bool) {
	if v == "" {
		return "", false
	}
	items := strings.Split(v, ",")
	for i, s := range items {
		if strings.TrimSpace(s) != "" {
			continue
		}
		if i > 0 {
			return "after " + quoteShort(strings.TrimSpace(items[i-1])), true
		}
		for _, next := range items[1:] {
			if next = strings.TrimSpace(next); next != "" {
				return "before " + quoteShort(next), true
			}
		}
		return "(the list is commas only)", true
	}
	return "", false
}

// parseCIDR parses "addr/bits", or, if bare, a lone address as /32 or /128
// (as wg(8) and wg-quick do). Zones are refused; IPv4-mapped IPv6 addresses
// are kept as written.
// prefix parses an Address or AllowedIPs item (CIDR, or a bare address as
// a host prefix), reporting a bad one.
func (p *parser) prefix(n int, key, s string) (netip.Prefix, bool) {
	pf, ok := parseCIDR(s, true)
	switch {
	case !ok && spaceSeparated(s):
		// wg(8) refuses it too; wg-quick's files separate with commas.
		f := strings.Fields(s)
		p.errorf(n, key, "%s is not an IP address or CIDR: separate several with ',', as in %s, %s", quoteShort(s), f[0], f[1])
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

// spaceSeparated reports whether s is two or more addresses or CIDRs
// separated by white space alone.
func spaceSeparated(s string) bool {
	f := strings.Fields(s)
	if len(f) < 2 {
		return false
	}
	for _, x := range f {
		if _, ok := parseCIDR(x, true); !ok {
			return false
		}
	}
	return true
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

// parseFwMark parses an FwMark value as wg(8) does (config.c parse_fwmark:
// "off" in any case, else strtoul with base 0: decimal, 0x hexadecimal or
// 0 octal, up to 2^32-1, nothing after the number).
func parseFwMark(v string) (uint32, bool) {
	if strings.EqualFold(v, "off") {
		return 0, true
	}
	if v == "" || strings.ContainsAny(v, "_+-") || strings.HasPrefix(v, "0o") || strings.HasPrefix(v, "0b") ||
		strings.HasPrefix(v, "0O") || strings.HasPrefix(v, "0B") {
		return 0, false // Go's base-0 extras that strtoul does not take
	}
	m, err := strconv.ParseUint(v, 0, 32)
	if err != nil {
		return 0, false
	}
	return uint32(m), true
}
