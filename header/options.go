package header

// IPv4 option types (RFC 791 §3.1, RFC 2113, FIPS 188; end of list and
// no-operation in fragment.go) and IPv6 hop-by-hop option types (RFC 8200
// §4.2, IANA "Destination Options and Hop-by-Hop Options") that
// TransitOptions reads.
const (
	ipv4OptRR    = 7    // record route
	ipv4OptTS    = 0x44 // timestamp (RFC 791 §3.1 "Internet Timestamp")
	ipv4OptLSRR  = 0x83 // loose source and record route
	ipv4OptSSRR  = 0x89 // strict source and record route
	ipv4OptCIPSO = 0x86 // commercial IP security option (FIPS 188)
	ipv4OptRA    = 0x94 // router alert, RFC 2113

	// The timestamp option's flags (the low four bits of its fourth
	// byte; the high four count overflows).
	ipv4TSAndAddr = 1 // address and timestamp pairs
	ipv4TSPrespec = 3 // timestamps of prespecified addresses
	ipv4TSOverMax = 15

	hbhPad1     = 0
	hbhPadN     = 1
	hbhAlert    = 5    // router alert, RFC 2711
	hbhCALIPSO  = 7    // RFC 5570
	hbhIOAM     = 0x31 // RFC 9486
	hbhJumbo    = 0xc2 // jumbo payload, RFC 2675
	hbhActMask  = 0xc0 // the two high bits: what a node that does not know the option does
	hbhNextOff  = 2    // options start after next header and length
	hbhUnitSize = 8    // Hdr Ext Len counts 8-octet units beyond the first

	// Linux's limits on a hop-by-hop header (ip6_parse_tlv): padding in
	// a row (Pad1 and PadN, type and length bytes included) of at most 7
	// bytes, since more is never needed to align the next option (RFC
	// 4942 §2.1.9.5), and at most 8 options other than padding (the
	// default of the sysctl net.ipv6.max_hbh_opts_number).
	hbhMaxPad     = 7
	hbhMaxOptions = 8
)

// OptionsPlain reports whether the IP packet p (header checked) has no
// options TransitOptions would judge: an IPv4 header of 20 bytes, or IPv6
// without a hop-by-hop  One or two compares, inlined; false means:
// ask TransitOptions.
func OptionsPlain(p []byte) bool {
	return p[0] == 0x45 || p[0]>>4 == IPv6Version && p[6] != ProtoHopByHop
}

// TransitOptions judges the options of the transit IP packet p (header
// checked) as Linux's forwarding path does (ip_options_compile and
// ip_rcv_options for IPv4, ip6_parse_tlv for IPv6's hop-by-hop header,
// read on Linux 6.x), and returns TransitOK when p may be forwarded, else
// TransitIPOptions. ipv4Options and hopByHopOptions list the
// rules. Linux answers some of the packets it drops with "parameter
// problem" (ICMP type 12, ICMPv6 type 4) pointing at the bad byte:
// OptionsError gives that answer, from the drop's rare path.
//
// Options that pass are left as they came: record route and timestamp,
// which Linux fills in, router alert, padding.
//
//go:noinline
func TransitOptions(p []byte) Transit {
	var ok bool
	if p[0]>>4 == IPv4Version {
		ok = ipv4Options(p[IPv4MinLen:IPv4(p).HeaderLen()])
	} else {
		ok = hopByHopOptions(p[IPv6Len : IPv6Len+IPv6(p).PayloadLength()])
	}
	if !ok {
		return TransitIPOptions
	}
	return TransitOK
}

// ipv4Options reports whether Linux forwards a packet with the IPv4
// options opts (the header's bytes after the first 20): the options up to
// an end of list, each (but no-operation) with a length of at least 2 and
// within the header; no loose or strict source route (accept_source_route
// is 0 on a router: ip_rcv_options drops it); at most one record route
// and one timestamp option; a record route of at least 3 bytes whose
// pointer is at least 4 and, when it is within the option, leaves room
// for an address (pointer + 3 ≤ length); a timestamp of at least 4 bytes
// whose pointer is at least 5 and, within the option, leaves room for a
// timestamp (pointer + 3 ≤ length) or, with the flags 1 and 3, an address
// and a timestamp (pointer + 7 ≤ length), and when the option is full
// (pointer past it) has an overflow count below 15 (flags 3 excepted);
// a router alert of at least 4 bytes (RFC 791 §3.1, RFC 2113). Linux
// answers each of these drops but the source route with "parameter
// problem".
//
// A CIPSO option (FIPS 188) is dropped too, as
// Linux does (with parameter problem) when NetLabel has no CIPSO DOI
// configured, its default; a Linux router configured with one forwards
// the labels it validates.
func ipv4Options(opts []byte) bool {
	ptr, srr, _ := ipv4Compile(opts)
	return ptr < 0 && !srr
}

// hopByHopOptions reports whether Linux forwards a packet whose IPv6
// extension headers begin with the hop-by-hop header in ext (the bytes
// after the fixed header, up to the payload length): the header within
// ext, its options each within it; padding in a row (Pad1, PadN) of at
// most hbhMaxPad bytes, PadN's data all zero; at most hbhMaxOptions
// options other than padding; a router alert of 2 bytes of data; no
// CALIPSO option (RFC 5570), which Linux's ipv6_hop_calipso drops unless
// NetLabel validates it (calipso_validate: its checksum, and a DOI that
// `netlabelctl calipso add` configured; none is by default), as IPv4's
// CIPSO option (observed on Linux 6.18, CONFIG_NETLABEL=y: a well-formed
// option of DOI 1 with a valid checksum is dropped, Ip6InHdrErrors); an
// IOAM option at an offset from the IPv6 header that is a multiple of 4
// (RFC 9486 §4.2, its data not judged: Linux ignores it where IOAM is
// not enabled, the default); no unknown option whose type's two high
// bits are not 00, "discard the packet" (RFC 8200 §4.2). Linux answers the last with "parameter problem" when
// the bits are 10 or 11 (the destination is never multicast here:
// TransitAddrs drops those first), and drops the others silently.
func hopByHopOptions(ext []byte) bool {
	if len(ext) < hbhUnitSize {
		return false
	}
	n := (int(ext[1]) + 1) * hbhUnitSize
	if n > len(ext) {
		return false
	}
	off := hbhNextOff // from the start of ext
	pad, count := 0, 0
	for off < n {
		t := ext[off]
		if t == hbhPad1 {
			if pad++; pad > hbhMaxPad {
				return false
			}
			off++
			continue
		}
		if off+2 > n || off+2+int(ext[off+1]) > n {
			return false
		}
		o := ext[off : off+2+int(ext[off+1])]
		if t == hbhPadN {
			if pad += len(o); pad > hbhMaxPad || !allZero(o[2:]) {
				return false
			}
			off += len(o)
			continue
		}
		if count++; count > hbhMaxOptions {
			return false
		}
		switch t {
		case hbhAlert:
			if o[1] != 2 {
				return false
			}
		case hbhCALIPSO:
			return false
		case hbhIOAM:
			if (IPv6Len+off)%4 != 0 {
				return false
			}
		default:
			if t&hbhActMask != 0 {
				return false
			}
		}
		pad = 0
		off += len(o)
	}
	return true
}

// allZero reports whether every byte of b is 0.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
