package header

// Destination unreachable and parameter problem: the errors a router sends
// for a packet it has no next hop for and for a header it cannot process.
const (
	// ICMPv4CodeHostUnreachable with ICMPv4TypeDestUnreachable is "host
	// unreachable" (RFC 792; RFC 1812 §5.2.7.1: the router knows the
	// destination's network but cannot reach the host), what Linux's
	// WireGuard sends for a packet no peer takes (wg_xmit).
	ICMPv4CodeHostUnreachable = 1
	// ICMPv4TypeParamProblem, code 0, is "parameter problem" (RFC 792;
	// RFC 1812 §4.3.2.1 (6)): the high byte of bytes 4–7 points at the
	// octet of the offending header that is wrong.
	ICMPv4TypeParamProblem = 12
	// ICMPv6TypeDestUnreachable with ICMPv6CodeAddrUnreachable is
	// "address unreachable", with ICMPv6CodeBeyondScope "beyond scope of
	// source address", with ICMPv6CodeNoRoute "no route to destination"
	// (RFC 4443 §3.1).
	ICMPv6TypeDestUnreachable = 1
	ICMPv6CodeNoRoute         = 0
	ICMPv6CodeBeyondScope     = 2
	ICMPv6CodeAddrUnreachable = 3
	// ICMPv6TypeParamProblem is "parameter problem" (RFC 4443 §3.4):
	// bytes 4–7 are the offset of the error from the start of the
	// offending packet; code ICMPv6CodeErroneousHeader (an erroneous
	// header field) or ICMPv6CodeUnrecognizedOption (an unrecognized
	// IPv6 option, RFC 8200 §4.2).
	ICMPv6TypeParamProblem       = 4
	ICMPv6CodeErroneousHeader    = 0
	ICMPv6CodeUnrecognizedOption = 2
)

// PutICMPv4HostUnreachable writes, into b, ICMPv4 "destination
// unreachable, host unreachable" (type 3, code 1, RFC 792) from src to the
// source of offending. Quote, reply header, buffer rules and the packets
// no error is sent about are those of PutICMPv4FragNeeded; offending is
// quoted as it is (a forwarded packet's TTL already lowered, as Linux
// quotes what reached its wg0).
//
// It allocates nothing and keeps neither slice; b and offending must not
// overlap.
func PutICMPv4HostUnreachable(b []byte, src [4]byte, offending []byte) (int, Reason) {
	return putICMPv4Error(b, src, offending, ICMPv4TypeDestUnreachable, ICMPv4CodeHostUnreachable, 0)
}

// PutICMPv4ParamProblem writes, into b, ICMPv4 "parameter problem" (type
// 12, code 0, RFC 792) from src to the source of offending, whose byte 4,
// the pointer, is ptr: the offset, from the first byte of offending's IP
// header, of the octet where the error was found (Linux's
// ip_options_compile points into the options). Quote, reply header,
// buffer rules and the packets no error is sent about are those of
// PutICMPv4FragNeeded.
//
// It allocates nothing and keeps neither slice; b and offending must not
// overlap.
func PutICMPv4ParamProblem(b []byte, src [4]byte, offending []byte, ptr uint8) (int, Reason) {
	return putICMPv4Error(b, src, offending, ICMPv4TypeParamProblem, 0, uint32(ptr)<<24)
}

// PutICMPv6AddrUnreachable writes, into b, ICMPv6 "destination
// unreachable, address unreachable" (type 1, code 3, RFC 4443 §3.1) from
// src to the source of offending. The rules are PutICMPv6TimeExceeded's:
// no error about an error, or to a source that is not one host, or about
// a packet to a multicast destination (RFC 4443 §2.4(e)).
//
// It allocates nothing and keeps neither slice; b and offending must not
// overlap.
func PutICMPv6AddrUnreachable(b []byte, src [16]byte, offending []byte) (int, Reason) {
	return putICMPv6Error(b, src, offending, ICMPv6TypeDestUnreachable, ICMPv6CodeAddrUnreachable, 0)
}

// PutICMPv6NoRoute writes, into b, ICMPv6 "destination unreachable, no
// route to destination" (type 1, code 0, RFC 4443 §3.1) from src to the
// source of offending, as Linux answers a packet its routing table has no
// route for (ip6_pkt_drop). The rules are PutICMPv6AddrUnreachable's;
// offending is quoted as it is.
//
// It allocates nothing and keeps neither slice; b and offending must not
// overlap.
func PutICMPv6NoRoute(b []byte, src [16]byte, offending []byte) (int, Reason) {
	return putICMPv6Error(b, src, offending, ICMPv6TypeDestUnreachable, ICMPv6CodeNoRoute, 0)
}

// PutICMPv6BeyondScope writes, into b, ICMPv6 "destination unreachable,
// beyond scope of source address" (type 1, code 2, RFC 4443 §3.1) from src
// to the source of offending, as a router answers a packet from a
// link-local source that it would have to forward off that source's link
// (RFC 4291 §2.5.6; Linux's ip6_forward). The rules are
// PutICMPv6AddrUnreachable's; offending is quoted as it is (the caller
// passes it as received: Linux answers before it lowers the hop limit).
//
// It allocates nothing and keeps neither slice; b and offending must not
// overlap.
func PutICMPv6BeyondScope(b []byte, src [16]byte, offending []byte) (int, Reason) {
	return putICMPv6Error(b, src, offending, ICMPv6TypeDestUnreachable, ICMPv6CodeBeyondScope, 0)
}

// PutICMPv6ParamProblem writes, into b, ICMPv6 "parameter problem" (type
// 4, RFC 4443 §3.4) of code code from src to the source of offending, its
// pointer ptr: the offset in octets, from the first byte of offending's
// fixed header, of the error. The rules are PutICMPv6TimeExceeded's, except
// that code ICMPv6CodeUnrecognizedOption may answer a packet to a
// multicast destination (RFC 4443 §2.4(e.2); the caller checks the
// option's action bits, RFC 8200 §4.2: 10 answers a multicast
// destination, 11 does not).
//
// It allocates nothing and keeps neither slice; b and offending must not
// overlap.
func PutICMPv6ParamProblem(b []byte, src [16]byte, offending []byte, code uint8, ptr uint32) (int, Reason) {
	return putICMPv6Error(b, src, offending, ICMPv6TypeParamProblem, code, ptr)
}

// ICMPv6ErrorAllowedCode is ICMPv6ErrorAllowed for any error type typ and
// its code code (PutICMPv6AddrUnreachable's and PutICMPv6ParamProblem's
// too, whose multicast rules depend on the code).
//
// It allocates nothing and keeps no slice.
func ICMPv6ErrorAllowedCode(offending []byte, typ, code uint8) Reason {
	_, r := checkICMPv6Error(offending, typ, code)
	return r
}
