package bind_test

import (
	"crypto/rand"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/topo"
	"golang.org/x/sys/unix"
)

// badInput sends, from gwB's side of the WAN, frames that are not valid
// WireGuard datagrams: runts, IPv4 and UDP lengths that lie, bad header
// checksums, garbage payloads to our port, and an ARP storm. The bind
// must count what the XDP filter gives it, the filter must pass the rest
// to the kernel, and the tunnel must keep working (checked by the caller).
func badInput(t *testing.T, p *pair) {
	wanB, err := p.gB.LinkMAC(p.wanB)
	must(t, err)
	l, err := p.gB.Handle().LinkByName(p.wanB)
	must(t, err)
	dstMAC, err := p.gA.LinkMAC(p.wanA)
	must(t, err)
	var fd int
	must(t, p.gB.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		return err
	}))
	defer unix.Close(fd)
	sa := &unix.SockaddrLinklayer{Ifindex: l.Attrs().Index, Halen: 6}
	copy(sa.Addr[:], dstMAC)
	send := func(f []byte) {
		if err := unix.Sendto(fd, f, 0, sa); err != nil {
			t.Fatalf("inject %d-byte frame: %v", len(f), err)
		}
	}
	src := netip.MustParseAddr("198.18.2.2")
	if p.wanBAddr.Is4() {
		src = p.wanBAddr
	}
	good := func(payload []byte) []byte {
		f := make([]byte, 42+len(payload))
		header.PutEthernet(f, header.MAC(dstMAC), header.MAC(wanB), header.EtherTypeIPv4)
		header.PutIPv4(f[14:], &header.IPv4Fields{Protocol: header.ProtoUDP, Src: src.As4(), Dst: wanA4.As4()}, 8+len(payload))
		header.PutUDP(f[34:], wgPort, wgPort, len(payload))
		copy(f[42:], payload)
		return f
	}
	before := p.bindA.Stats()
	passBefore := p.wanPort.Stats().Backend["xdp_pass"]
	lostBefore := wanLinkDrops(t, p)
	const each = 20
	for i := range each {
		send(good(nil)[:14+10])     // runt: truncated IPv4 header
		send(good(nil)[:14+20+4])   // runt: truncated UDP header
		f := good(make([]byte, 32)) // IPv4 total length past the frame
		binary.BigEndian.PutUint16(f[16:], 200)
		header.IPv4(f[14:34]).SetChecksum()
		send(f)
		f = good(make([]byte, 32)) // UDP length past the IP payload
		binary.BigEndian.PutUint16(f[38:], 300)
		send(f)
		f = good(make([]byte, 32)) // UDP length below its header
		binary.BigEndian.PutUint16(f[38:], 4)
		send(f)
		f = good(make([]byte, 32)) // bad IPv4 header checksum
		f[24] ^= 0x55
		send(f)
		garbage := make([]byte, 16+i*7) // not WireGuard
		rand.Read(garbage)
		send(good(garbage))
		tm := make([]byte, 32+16) // transport data with an unknown receiver index
		tm[0] = 4
		rand.Read(tm[4:])
		send(good(tm))
	}
	const storm = 500
	for i := range storm {
		req := make([]byte, 60)
		sender := netip.AddrFrom4([4]byte{198, 18, 2, byte(10 + i%200)})
		n, err := (&arp.ARP{EthDst: arp.Broadcast, EthSrc: arp.MAC(wanB), Op: arp.ARPRequest, SenderMAC: arp.MAC(wanB), SenderIP: sender, TargetIP: wanA4}).Marshal(req)
		must(t, err)
		send(req[:n])
	}
	type check struct {
		what      string
		got, want uint64
	}
	var (
		after     bind.Stats
		passAfter uint64
		lost      uint64
		checks    []check
	)
	// The bind counts a frame when wireguard-go's receive goroutine reads
	// it, whenever the scheduler runs that: wait until every count is
	// reached (the bound only ends a test whose bind lost frames). The
	// storm, sent back to back, may overflow the veth's ring in front of
	// gwA's XDP program on a loaded machine: the kernel counts those at
	// the links, and the XDP program never sees them.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		after = p.bindA.Stats()
		passAfter = p.wanPort.Stats().Backend["xdp_pass"]
		lost = wanLinkDrops(t, p) - lostBefore
		checks = []check{
			{"IPv4 length past frame", after.Parse[header.ReasonLengthExceedsFrame] - before.Parse[header.ReasonLengthExceedsFrame], each},
			{"bad UDP length", after.Parse[header.ReasonBadUDPLength] - before.Parse[header.ReasonBadUDPLength], 2 * each},
			{"bad IPv4 checksum", after.Parse[header.ReasonBadIPv4Checksum] - before.Parse[header.ReasonBadIPv4Checksum], each},
			{"malformed", after.Drops[bind.DropMalformed] - before.Drops[bind.DropMalformed], 4 * each},
		}
		reached := after.RXPackets-before.RXPackets >= 2*each && passAfter-passBefore+lost >= storm+2*each
		for _, c := range checks {
			reached = reached && c.got >= c.want
		}
		if reached || time.Now().After(deadline) {
			break
		}
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("bind counted %d %s frames, want %d", c.got, c.what, c.want)
		}
	}
	if got := after.RXPackets - before.RXPackets; got < 2*each {
		t.Errorf("bind handed %d datagrams to wireguard-go, want at least the %d garbage ones", got, 2*each)
	}
	if got := passAfter - passBefore; got+lost < storm+2*each {
		t.Errorf("XDP passed %d frames to the kernel and the links dropped %d, want at least %d (ARP storm and runts)", got, lost, storm+2*each)
	} else if lost > 0 {
		t.Logf("the links between the gateways dropped %d frames (machine load), counted by the kernel", lost)
	}
	t.Logf("bad input: bind parse drops %v; XDP passed %d", after.Parse, passAfter-passBefore)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// wanLinkDrops sums the kernel's drop counters of the links of both
// gateways' namespaces (a veth whose peer had no room in the ring in front
// of its XDP program counts the frame there).
func wanLinkDrops(t *testing.T, p *pair) uint64 {
	t.Helper()
	total, _, err := topo.LinkDrops(p.gA, p.gB)
	must(t, err)
	return total
}
