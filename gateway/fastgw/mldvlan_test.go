//go:build linux

package fastgw_test

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
)

// vlanFrame is a frame an AF_PACKET socket read, with the VLAN it came
// on (0: untagged): the kernel takes a tag off before the socket sees the
// frame and gives it in the PACKET_AUXDATA.
type vlanFrame struct {
	vid  uint16
	data []byte // untagged
}

// packetCapture opens an AF_PACKET socket on dev in ns with PACKET_AUXDATA
// and returns a channel of the frames it reads, until the test ends.
func packetCapture(t *testing.T, ns *topo.NS, dev string) <-chan vlanFrame {
	t.Helper()
	var fd int
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		proto := int(uint16(unix.ETH_P_ALL)<<8 | uint16(unix.ETH_P_ALL)>>8) // network order
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto); err != nil {
			return os.NewSyscallError("socket", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			return os.NewSyscallError("setsockopt PACKET_AUXDATA", err)
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifi.Index})
	}); err != nil {
		t.Fatal(err)
	}
	ch := make(chan vlanFrame, 256)
	done := make(chan struct{})
	t.Cleanup(func() { unix.Close(fd); <-done })
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
	go func() {
		defer close(done)
		buf, oob := make([]byte, 4096), make([]byte, 256)
		for {
			n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			if err != nil {
				return
			}
			f := vlanFrame{data: append([]byte(nil), buf[:n]...)}
			if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for _, m := range msgs {
					if m.Header.Level == unix.SOL_PACKET && m.Header.Type == unix.PACKET_AUXDATA && len(m.Data) >= int(unsafe.Sizeof(unix.TpacketAuxdata{})) {
						aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&m.Data[0]))
						if aux.Status&unix.TP_STATUS_VLAN_VALID != 0 {
							f.vid = aux.Vlan_tci & 0xfff
						}
					}
				}
			}
			if len(f.data) >= 18 && binary.BigEndian.Uint16(f.data[12:14]) == 0x8100 { // a tag left in the frame
				f.vid = binary.BigEndian.Uint16(f.data[14:16]) & 0xfff
				f.data = append(f.data[:12:12], f.data[16:]...)
			}
			select {
			case ch <- f:
			default:
			}
		}
	}()
	return ch
}

// mldRecords returns the record types and groups of an untagged MLDv2
// report frame from mac, or false for any other frame.
func mldRecords(f []byte, mac net.HardwareAddr) (types []byte, groups []netip.Addr, ok bool) {
	const icmp = 14 + 40 + 8
	if len(f) < icmp+8 || net.HardwareAddr(f[6:12]).String() != mac.String() || binary.BigEndian.Uint16(f[12:14]) != 0x86dd ||
		f[20] != 0 || f[21] != 1 || f[54] != 58 || f[icmp] != arp.ICMPv6MLDv2Report ||
		netip.AddrFrom16([16]byte(f[38:54])) != netip.MustParseAddr("ff02::16") ||
		net.HardwareAddr(f[0:6]).String() != "33:33:00:00:00:16" {
		return nil, nil, false
	}
	n := int(binary.BigEndian.Uint16(f[icmp+6:]))
	for i := range n {
		r := f[icmp+8+20*i:]
		if len(r) < 20 {
			return nil, nil, false
		}
		types = append(types, r[0])
		groups = append(groups, netip.AddrFrom16([16]byte(r[4:20])))
	}
	return types, groups, true
}

// generalQuery builds an untagged MLDv2 General Query from fe80::99 to
// ff02::1 with a Maximum Response Delay of ms (RFC 3810 §5.1), with its
// Hop-by-Hop Router Alert.
func generalQuery(src net.HardwareAddr, ms uint16) []byte {
	ic := make([]byte, 28)
	ic[0] = 130
	binary.BigEndian.PutUint16(ic[4:], ms)
	ic[24], ic[25] = 2, 125
	s := netip.MustParseAddr("fe80::99").As16()
	d := netip.MustParseAddr("ff02::1").As16()
	var sum uint32
	for _, b := range [][]byte{s[:], d[:], {0, 0, 0, 28, 0, 0, 0, 58}, ic} {
		for i := 0; i < len(b); i += 2 {
			sum += uint32(b[i])<<8 | uint32(b[i+1])
		}
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ic[2:], ^uint16(sum))
	f := append([]byte{0x33, 0x33, 0, 0, 0, 1}, src...)
	f = append(f, 0x86, 0xdd, 0x60, 0, 0, 0, 0, 36, 0, 1)
	f = append(append(f, s[:]...), d[:]...)
	f = append(f, 58, 0, 5, 2, 0, 0, 1, 0)
	return append(f, ic...)
}

// TestMLDOnWANVLAN runs gwA in owned mode with an IPv6 WANAddress on
// VLAN 7 of its WAN (no kernel VLAN device), and reads gwB's end of the
// link, an access port of VLAN 7, with an AF_PACKET socket. As a Linux
// router's VLAN device would, the gateway reports the address's
// solicited-node group with MLDv2, tagged with VLAN 7: unsolicited
// CHANGE_TO_EXCLUDE reports within 3 s of the start, a MODE_IS_EXCLUDE one
// in answer to a General Query (sent untagged by gwB, tagged by its access
// port), and a CHANGE_TO_INCLUDE (the leave) at Close. Before, the group
// was joined at the link layer only and no report announced it: a switch
// that snoops MLD forwarded no neighbour solicitation for the address.
func TestMLDOnWANVLAN(t *testing.T) {
	s := newSite(t, twosite.Config{Owned: true, Outer6: true, WANVLAN: 7, NoFastPath: true})
	cfg := s.FastConfig
	group := arp.SolicitedNode(cfg.WANAddress.Addr())
	gwMAC, peerMAC := linkMAC(t, s.GwA, cfg.WAN), linkMAC(t, s.GwB, s.WANB)
	frames := packetCapture(t, s.GwB, s.WANB)
	// expect waits up to d for a report tagged with VLAN 7 with one
	// record of typ for the group.
	expect := func(what string, typ byte, d time.Duration) {
		t.Helper()
		timeout := time.After(d)
		for {
			select {
			case f := <-frames:
				types, groups, ok := mldRecords(f.data, gwMAC)
				if !ok || !slices.Contains(groups, group) {
					continue // the kernel's own reports (untagged) too
				}
				if f.vid != 7 {
					t.Errorf("%s: an MLD report from the gateway on VLAN %d, want 7", what, f.vid)
					continue
				}
				if len(types) == 1 && types[0] == typ && groups[0] == group {
					return
				}
				t.Logf("%s: report with records %v %v", what, types, groups)
			case <-timeout:
				t.Fatalf("%s: no MLDv2 report with a record of type %d for %v on VLAN 7 within %v", what, typ, group, d)
			}
		}
	}
	var g *fastgw.Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = fastgw.Start(cfg)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			g.Close()
		}
	}()
	expect("first unsolicited report", arp.MLDChangeToExclude, 3*time.Second)
	expect("second unsolicited report", arp.MLDChangeToExclude, 2*time.Second)

	testenv.SendFrames(t, s.GwB, s.WANB, generalQuery(peerMAC, 500))
	expect("answer to a general query", arp.MLDModeIsExclude, 2*time.Second)
	// The counter follows the send.
	waitFor(t, "the WAN MLD stats to count 1 query and 3 reports", func() bool {
		nb, _ := g.Neighbours()
		m := nb["wan"].MLD
		return m != nil && m.Queries == 1 && m.Reports == 3
	})
	if nb, _ := g.Neighbours(); len(nb["wan"].Drops) != 0 {
		t.Errorf("WAN neighbour drops %v, want none", nb["wan"].Drops)
	}
	g.Close()
	closed = true
	expect("leave at Close", arp.MLDChangeToInclude, 2*time.Second)
}
