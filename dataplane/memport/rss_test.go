package memport

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// frame4 returns an Ethernet/IPv4 frame with the given protocol and ports
// (ports written for any protocol; only TCP and UDP should be hashed).
func frame4(src, dst string, proto uint8, sport, dport uint16, vlan bool) []byte {
	b := make([]byte, 0, 64)
	b = append(b, 0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1)
	if vlan {
		b = append(b, 0x81, 0x00, 0x00, 0x07)
	}
	b = append(b, 0x08, 0x00)
	ip := make([]byte, 20)
	ip[0] = 0x45
	ip[8] = 64
	ip[9] = proto
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	b = append(b, ip...)
	b = binary.BigEndian.AppendUint16(b, sport)
	b = binary.BigEndian.AppendUint16(b, dport)
	return append(b, make([]byte, 8)...)
}

func frame6(src, dst string, nh uint8, sport, dport uint16) []byte {
	b := []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x86, 0xdd}
	ip := make([]byte, 40)
	ip[0] = 0x60
	ip[6] = nh
	ip[7] = 64
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	copy(ip[8:], s[:])
	copy(ip[24:], d[:])
	b = append(b, ip...)
	b = binary.BigEndian.AppendUint16(b, sport)
	b = binary.BigEndian.AppendUint16(b, dport)
	return append(b, make([]byte, 8)...)
}

func hashOf(t *testing.T, b []byte) uint32 {
	t.Helper()
	h, ok := rssHash(b)
	if !ok {
		t.Fatalf("rssHash(% x) = _, false, want an IP frame", b)
	}
	return h
}

func TestRSSTuple(t *testing.T) {
	base4 := frame4("198.18.0.1", "198.18.0.2", protoUDP, 1000, 2000, false)
	base6 := frame6("2001:db8::1", "2001:db8::2", protoUDP, 1000, 2000)
	tests := []struct {
		name string
		a, b []byte
		same bool
	}{
		{"ipv4 same flow", base4, frame4("198.18.0.1", "198.18.0.2", protoUDP, 1000, 2000, false), true},
		{"ipv4 vlan tag skipped", base4, frame4("198.18.0.1", "198.18.0.2", protoUDP, 1000, 2000, true), true},
		{"ipv4 source port", base4, frame4("198.18.0.1", "198.18.0.2", protoUDP, 1001, 2000, false), false},
		{"ipv4 destination port", base4, frame4("198.18.0.1", "198.18.0.2", protoUDP, 1000, 2001, false), false},
		{"ipv4 source address", base4, frame4("198.18.0.3", "198.18.0.2", protoUDP, 1000, 2000, false), false},
		{"ipv4 destination address", base4, frame4("198.18.0.1", "198.18.0.4", protoUDP, 1000, 2000, false), false},
		{"ipv4 tcp vs udp", base4, frame4("198.18.0.1", "198.18.0.2", protoTCP, 1000, 2000, false), false},
		{"ipv4 icmp ignores ports", frame4("198.18.0.1", "198.18.0.2", 1, 1, 2, false), frame4("198.18.0.1", "198.18.0.2", 1, 3, 4, false), true},
		{"ipv6 same flow", base6, frame6("2001:db8::1", "2001:db8::2", protoUDP, 1000, 2000), true},
		{"ipv6 source port", base6, frame6("2001:db8::1", "2001:db8::2", protoUDP, 1001, 2000), false},
		{"ipv6 source address", base6, frame6("2001:db8::3", "2001:db8::2", protoUDP, 1000, 2000), false},
		{"ipv6 extension header ignores ports", frame6("2001:db8::1", "2001:db8::2", 0, 1, 2), frame6("2001:db8::1", "2001:db8::2", 0, 3, 4), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ha, hb := hashOf(t, tt.a), hashOf(t, tt.b)
			if (ha == hb) != tt.same {
				t.Errorf("rssHash = %#x and %#x, want equal: %v", ha, hb, tt.same)
			}
		})
	}
}

func TestRSSFragments(t *testing.T) {
	first := frame4("198.18.0.1", "198.18.0.2", protoUDP, 1000, 2000, false)
	binary.BigEndian.PutUint16(first[14+6:], 0x2000) // MF
	later := frame4("198.18.0.1", "198.18.0.2", protoUDP, 7, 7, false)
	binary.BigEndian.PutUint16(later[14+6:], 185) // offset 1480, no MF
	if hashOf(t, first) != hashOf(t, later) {
		t.Errorf("fragments of one datagram hash apart: %#x, %#x", hashOf(t, first), hashOf(t, later))
	}
}

func TestRSSNonIP(t *testing.T) {
	arp := make([]byte, 42)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	short4 := frame4("198.18.0.1", "198.18.0.2", protoUDP, 1, 2, false)[:14+19]
	badVersion := frame4("198.18.0.1", "198.18.0.2", protoUDP, 1, 2, false)
	badVersion[14] = 0x65
	badIHL := frame4("198.18.0.1", "198.18.0.2", protoUDP, 1, 2, false)
	badIHL[14] = 0x4f // 60 bytes of header, more than the frame
	tests := []struct {
		name  string
		frame []byte
	}{
		{"nil", nil},
		{"runt", make([]byte, 13)},
		{"arp", arp},
		{"truncated ipv4", short4},
		{"ipv4 version 6", badVersion},
		{"ipv4 ihl past the frame", badIHL},
		{"truncated vlan", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x81, 0, 0}},
		{"truncated ipv6", frame6("2001:db8::1", "2001:db8::2", protoUDP, 1, 2)[:14+39]},
	}
	for _, tt := range tests {
		for _, q := range []int{1, 2, 7} {
			if got := RSSQueue(tt.frame, q); got != 0 {
				t.Errorf("RSSQueue(%s, %d) = %d, want 0", tt.name, q, got)
			}
		}
	}
}

// TestRSSSpread checks that many flows spread evenly over the queues: each
// queue gets its share within 25%.
func TestRSSSpread(t *testing.T) {
	const flows = 4096
	for _, q := range []int{2, 3, 4, 8} {
		counts := make([]int, q)
		for i := range flows {
			counts[RSSQueue(frame4("198.18.0.1", "198.18.0.2", protoUDP, uint16(40000+i), 51820, false), q)]++
		}
		for k, c := range counts {
			if want := flows / q; c < want*3/4 || c > want*5/4 {
				t.Errorf("queues %d: queue %d got %d of %d flows, want about %d", q, k, c, flows, want)
			}
		}
	}
}

// FuzzRSSQueue: RSSQueue never panics and stays in range on any input.
func FuzzRSSQueue(f *testing.F) {
	f.Add(frame4("198.18.0.1", "198.18.0.2", protoUDP, 1000, 2000, false), 4)    // plain UDP
	f.Add(frame4("198.18.0.1", "198.18.0.2", protoTCP, 1000, 2000, true), 3)     // tagged TCP
	f.Add(frame6("2001:db8::1", "2001:db8::2", protoUDP, 1000, 2000), 2)         // IPv6 UDP
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x81, 0, 0, 0, 0x08, 0}, 2) // tag then nothing
	f.Add([]byte{}, 1)                                                           // empty
	f.Fuzz(func(t *testing.T, b []byte, queues int) {
		queues = queues%maxQueues + 1
		if queues < 1 {
			queues += maxQueues
		}
		if got := RSSQueue(b, queues); got < 0 || got >= queues {
			t.Errorf("RSSQueue(% x, %d) = %d, want [0, %d)", b, queues, got, queues)
		}
	})
}

func BenchmarkRSSQueue(b *testing.B) {
	fr := frame4("198.18.0.1", "198.18.0.2", protoUDP, 1000, 2000, false)
	b.ReportAllocs()
	var sink int
	for b.Loop() {
		sink += RSSQueue(fr, 4)
	}
	_ = sink
}
