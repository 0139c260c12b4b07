package header

import "github.com/wgpio/wgpio/internal/counts"

// Reason says why Parse, ParseIP or an ICMP builder rejected a packet; the
// zero value OK means it was accepted. Callers drop the packet and count it
// by reason (in a ReasonCounts).
type Reason uint8

// Reasons, in the order Parse checks them.
const (
	OK Reason = iota
	// ReasonRunt: shorter than an Ethernet header, or tagged and shorter
	// than the 802.1Q tag.
	ReasonRunt
	// ReasonNotIP: the EtherType is neither IPv4 nor IPv6 (ARP, LLDP,
	// QinQ, ...); not an error, a frame for another handler.
	ReasonNotIP
	// ReasonTruncatedIP: fewer bytes than the fixed IP header.
	ReasonTruncatedIP
	// ReasonBadVersion: the IP version field does not match the
	// EtherType (or is neither 4 nor 6 for ParseIP).
	ReasonBadVersion
	// ReasonBadIHL: IPv4 IHL below 5 or past the bytes present.
	ReasonBadIHL
	// ReasonBadTotalLength: IPv4 total length smaller than the header.
	ReasonBadTotalLength
	// ReasonLengthExceedsFrame: the IPv4 total length or the IPv6
	// payload length claims more bytes than the frame holds.
	ReasonLengthExceedsFrame
	// ReasonBadIPv4Checksum: the IPv4 header checksum does not verify.
	ReasonBadIPv4Checksum
	// ReasonBadExtensionHeader: an IPv6 extension header runs past the
	// payload, or Hop-by-Hop Options is not first (RFC 8200 §4.1).
	ReasonBadExtensionHeader
	// ReasonTooManyExtensionHeaders: more than MaxExtensionHeaders IPv6
	// extension headers (a bound on work per packet, RFC 8200 §4.1).
	ReasonTooManyExtensionHeaders
	// ReasonFragment: an IPv4 or IPv6 fragment. The Packet's L3 fields
	// (addresses, L3 bounds, protocol, L4Off at the fragment data) are
	// filled, but no L4 header was read; a forwarder may accept it.
	ReasonFragment
	// ReasonTruncatedL4: fewer bytes than the UDP (8), TCP (20),
	// ICMPv4 (8) or ICMPv6 (4) header.
	ReasonTruncatedL4
	// ReasonBadUDPLength: UDP length below 8 or past the IP payload.
	ReasonBadUDPLength
	// ReasonUDPZeroChecksum: a UDP datagram over IPv6 with checksum 0
	// (RFC 8200 §8.1: discard).
	ReasonUDPZeroChecksum
	// ReasonICMPNotAllowed: an ICMP error must not be sent about this
	// packet (RFC 1812 §4.3.2.7, RFC 4443 §2.4(e)).
	ReasonICMPNotAllowed
	// ReasonBufferTooSmall: the output buffer cannot hold the message.
	ReasonBufferTooSmall

	// NumReasons is the number of reasons, for arrays of counters.
	NumReasons
)

var reasonNames = [NumReasons]string{
	OK:                            "ok",
	ReasonRunt:                    "runt",
	ReasonNotIP:                   "not IP",
	ReasonTruncatedIP:             "truncated IP header",
	ReasonBadVersion:              "bad IP version",
	ReasonBadIHL:                  "bad IPv4 IHL",
	ReasonBadTotalLength:          "bad IPv4 total length",
	ReasonLengthExceedsFrame:      "IP length exceeds frame",
	ReasonBadIPv4Checksum:         "bad IPv4 header checksum",
	ReasonBadExtensionHeader:      "bad IPv6 extension header",
	ReasonTooManyExtensionHeaders: "too many IPv6 extension headers",
	ReasonFragment:                "fragment",
	ReasonTruncatedL4:             "truncated L4 header",
	ReasonBadUDPLength:            "bad UDP length",
	ReasonUDPZeroChecksum:         "zero UDP checksum on IPv6",
	ReasonICMPNotAllowed:          "ICMP error not allowed",
	ReasonBufferTooSmall:          "buffer too small",
}

// String returns a short lowercase name, or "reason(N)" for an unknown value.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "reason(" + itoa(int(r)) + ")"
}

const _ = counts.MaxReasons - NumReasons // at most MaxReasons reasons

// IPHeaderOK reports whether Parse or ParseIP, returning r, found the IP
// header sound and filled the Packet's L3 fields (L3Off, L3End, Src, Dst,
// IPVersion, TTL): OK, ReasonFragment, and the reasons about what follows
// the IP header (IPv6 extension headers, the upper-layer header). A router
// forwards such a packet: it checks the IP header only (RFC 1812 §5.2.2;
// RFC 8200 §4 for extension headers), and the upper layer is the hosts'.
func (r Reason) IPHeaderOK() bool {
	switch r {
	case OK, ReasonFragment, ReasonBadExtensionHeader, ReasonTooManyExtensionHeaders,
		ReasonTruncatedL4, ReasonBadUDPLength, ReasonUDPZeroChecksum:
		return true
	}
	return false
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return string(b[i:])
}

// ReasonCounts counts packets by reason, indexed by Reason. In JSON it is
// an object of the nonzero counts by reason name, which UnmarshalJSON reads
// back; an unknown name is an error. Its methods (those of
// internal/counts.Counts, which go doc does not list): List gives the
// nonzero counts as sorted "reason=count" strings (print that: %v prints
// the whole array), Total their sum, Add adds another's.
type ReasonCounts = counts.Counts[Reason]
