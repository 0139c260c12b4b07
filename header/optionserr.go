package header

import "encoding/binary"

// OptionsError returns the "parameter problem" Linux answers the transit
// IP packet p (header checked) with when TransitOptions drops it: the
// ICMP code (0 for IPv4, ICMPv6 type 4's code for IPv6) and the pointer,
// an offset from the start of p, of the bad octet; false when Linux drops
// p without an answer. Read for the contract in Linux 6.18's
// ip_options_compile (net/ipv4/ip_options.c) and ip6_parse_tlv
// (net/ipv6/exthdrs.c):
//
//   - IPv4 (RFC 792, RFC 1812 §4.3.2.1 (6), §5.2.5): every option that
//     does not parse, and every record route, timestamp, router alert,
//     source route or CIPSO option ipv4Options rejects, gets type 12 code
//     0 with the pointer ipv4Compile finds; a well-formed loose or strict
//     source route is dropped silently (accept_source_route 0:
//     ip_rcv_options);
//   - IPv6 (RFC 8200 §4.2, RFC 4443 §3.4): an unknown hop-by-hop option
//     whose type's two high bits are 10, or 11 to a destination that is
//     not multicast, gets type 4 code 2 pointing at the option's type;
//     everything else hopByHopOptions drops (padding, too many options,
//     router alert, CALIPSO, IOAM, bad lengths, unknown 01) silently.
//
// A rare path: asked only of a packet TransitOptions dropped.
func OptionsError(p []byte) (code uint8, ptr uint32, ok bool) {
	if p[0]>>4 == IPv4Version {
		at, _, quiet := ipv4Compile(p[IPv4MinLen:IPv4(p).HeaderLen()])
		if at < 0 || quiet {
			return 0, 0, false
		}
		return 0, uint32(IPv4MinLen + at), true
	}
	code, off, ok := hopByHopError(p[IPv6Len:IPv6Len+IPv6(p).PayloadLength()], p[24] == 0xff)
	if !ok {
		return 0, 0, false
	}
	return code, uint32(IPv6Len + off), true
}

// ipv4Compile walks the IPv4 options opts (the header's bytes after the
// first 20) as Linux's ip_options_compile does for a received packet and
// returns the offset in opts of the octet its "parameter problem" would
// point at, or -1 when every option passes; srr reports a source route
// (loose or strict) that passed, which Linux then drops without an answer.
// The rules are ipv4Options' (which is ptr < 0 && !srr); the pointer is,
// per option: its type octet for an option past the header, a second
// record route, timestamp or source route; its length octet for an
// option too short for its kind (source route and record route below 3,
// timestamp and router alert below 4, CIPSO below 8); its pointer octet
// for a pointer below the first slot or leaving no room for an entry;
// a timestamp's flags octet for an overflow count at 15; a CIPSO option's
// DOI (its third octet) otherwise, since no DOI is configured (NetLabel's
// default: cipso_v4_validate).
//
// quiet reports an error Linux does not answer after all: its
// __icmp_send echoes the record route and timestamp options compiled
// before the bad one into the error's header (__ip_options_echo), with
// their pointers moved past the entries the router filled in, and gives
// up (-EINVAL) when such a pointer, within its option, leaves no room for
// the next entry (observed on Linux 6.18: a record route of 8 bytes,
// pointer 4, then a bad option, gets no answer).
func ipv4Compile(opts []byte) (ptr int, srr, quiet bool) {
	var rr, ts bool
	var echo echoState
	fail := func(at int) (int, bool, bool) { return at, srr, echo.fails() }
	for off := 0; off < len(opts); {
		o := opts[off:]
		switch o[0] {
		case ipv4OptEOL:
			return -1, srr, false
		case ipv4OptNOP:
			off++
			continue
		}
		if len(o) < 2 || o[1] < 2 || int(o[1]) > len(o) {
			return fail(off)
		}
		o = o[:o[1]]
		switch o[0] {
		case ipv4OptLSRR, ipv4OptSSRR:
			switch {
			case len(o) < 3:
				return fail(off + 1)
			case o[2] < 4:
				return fail(off + 2)
			case srr:
				return fail(off)
			}
			srr = true
		case ipv4OptRR:
			switch {
			case rr:
				return fail(off)
			case len(o) < 3:
				return fail(off + 1)
			case o[2] < 4, int(o[2]) <= len(o) && int(o[2])+3 > len(o):
				return fail(off + 2)
			}
			rr = true
			if int(o[2]) <= len(o) { // an address filled in
				echo.rrLen, echo.rrPtr, echo.rrAddr = len(o), int(o[2])+4, true
			}
		case ipv4OptTS:
			if ts {
				return fail(off)
			}
			if at := timestampError(o); at >= 0 {
				return fail(off + at)
			}
			ts = true
			echo.timestamp(o)
		case ipv4OptRA:
			if len(o) < 4 {
				return fail(off + 1)
			}
		case ipv4OptCIPSO:
			// Linux's check for a second CIPSO option never comes:
			// the first fails validation.
			if len(o) < 8 {
				return fail(off + 1)
			}
			return fail(off + 2) // no DOI configured
		}
		off += len(o)
	}
	return -1, srr, false
}

// echoState is what Linux's __ip_options_echo reads of the record route
// and timestamp options ip_options_compile passed: their lengths, their
// pointers as compile left them (moved past the entries it filled in),
// and which entries the error's header would need filled.
type echoState struct {
	rrLen, rrPtr   int
	rrAddr         bool
	tsLen, tsPtr   int
	tsAddr, tsTime bool
}

// timestamp notes the timestamp option o (passed by timestampError) as
// compile leaves it: within the option, flags 0 take a timestamp (pointer
// + 4), flags 1 an address and a timestamp (+ 8), flags 3 a timestamp
// when the prespecified address is not a unicast one of Linux's table
// (inet_addr_type: 0.0.0.0/8, 255.255.255.255 and multicast here; the
// host's own addresses and its subnets' broadcasts too, which the
// gateway does not judge) (+ 8); others nothing.
func (e *echoState) timestamp(o []byte) {
	ptr := int(o[2])
	if ptr > len(o) {
		return // full
	}
	e.tsLen, e.tsPtr = len(o), ptr
	switch o[3] & 0xf {
	case 0:
		e.tsTime, e.tsPtr = true, ptr+4
	case ipv4TSAndAddr:
		e.tsAddr, e.tsTime, e.tsPtr = true, true, ptr+8
	case ipv4TSPrespec:
		if a := o[ptr-1 : ptr+3]; a[0] == 0 || a[0]>>4 == 0xe || binary.BigEndian.Uint32(a) == 0xffffffff {
			e.tsTime, e.tsPtr = true, ptr+8
		}
	}
}

// fails reports whether __ip_options_echo gives up on these options: a
// filled record route or timestamp whose moved pointer, within its option,
// leaves no room for the entry the echo would need.
func (e *echoState) fails() bool {
	if e.rrAddr && e.rrPtr <= e.rrLen && e.rrPtr+3 > e.rrLen {
		return true
	}
	if e.tsLen == 0 || e.tsPtr > e.tsLen {
		return false
	}
	p := e.tsPtr
	if e.tsAddr {
		if p+3 > e.tsLen {
			return true
		}
		p += 4
	}
	return e.tsTime && p+3 > e.tsLen
}

// timestampError returns the offset in the timestamp option o (its length
// checked against the header) of the octet Linux's parameter problem
// points at, or -1 when it passes.
func timestampError(o []byte) int {
	switch {
	case len(o) < 4:
		return 1
	case o[2] < 5:
		return 2
	}
	ptr, flags := int(o[2]), o[3]&0xf
	if ptr > len(o) { // full
		if flags != ipv4TSPrespec && o[3]>>4 == ipv4TSOverMax {
			return 3
		}
		return -1
	}
	need := 3
	if flags == ipv4TSAndAddr || flags == ipv4TSPrespec {
		need = 7
	}
	if ptr+need > len(o) {
		return 2
	}
	return -1
}

// hopByHopError walks the hop-by-hop header at the start of ext as
// hopByHopOptions does and, when Linux answers the drop, returns the
// ICMPv6 parameter problem's code and the offset in ext it points at: an
// unknown option of action 10, or 11 when the destination is not
// multicast (mcast false), code 2 at the option's type; a jumbo payload
// option (RFC 2675 §3, which Linux's ipv6_hop_jumbo reads: of 4 bytes of
// data at 4n+2 from the IPv6 header, else dropped silently) code 0 at
// its length when that is 65,535 or less, else at its type (the IPv6
// payload length is not 0). false for a packet that passes or that Linux
// drops without an answer.
func hopByHopError(ext []byte, mcast bool) (code uint8, off int, ok bool) {
	if len(ext) < hbhUnitSize {
		return 0, 0, false
	}
	n := (int(ext[1]) + 1) * hbhUnitSize
	if n > len(ext) {
		return 0, 0, false
	}
	off, pad, count := hbhNextOff, 0, 0
	for off < n {
		t := ext[off]
		if t == hbhPad1 {
			if pad++; pad > hbhMaxPad {
				return 0, 0, false
			}
			off++
			continue
		}
		if off+2 > n || off+2+int(ext[off+1]) > n {
			return 0, 0, false
		}
		o := ext[off : off+2+int(ext[off+1])]
		if t == hbhPadN {
			if pad += len(o); pad > hbhMaxPad || !allZero(o[2:]) {
				return 0, 0, false
			}
			off += len(o)
			continue
		}
		if count++; count > hbhMaxOptions {
			return 0, 0, false
		}
		switch t {
		case hbhAlert:
			if o[1] != 2 {
				return 0, 0, false
			}
		case hbhCALIPSO:
			return 0, 0, false
		case hbhIOAM:
			if (IPv6Len+off)%4 != 0 {
				return 0, 0, false
			}
		case hbhJumbo:
			if o[1] != 4 || (IPv6Len+off)%4 != 2 {
				return 0, 0, false
			}
			if binary.BigEndian.Uint32(o[2:6]) <= 0xffff {
				return ICMPv6CodeErroneousHeader, off + 2, true
			}
			return ICMPv6CodeErroneousHeader, off, true
		default:
			switch t & hbhActMask {
			case 0x40:
				return 0, 0, false
			case 0x80:
				return ICMPv6CodeUnrecognizedOption, off, true
			case 0xc0:
				return ICMPv6CodeUnrecognizedOption, off, !mcast
			}
		}
		pad = 0
		off += len(o)
	}
	return 0, 0, false
}
