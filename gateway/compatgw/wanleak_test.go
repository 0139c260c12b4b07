package compatgw

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/tundev"
)

// TestRemovedPeerNoCleartext: once the peer is removed, over the UAPI
// socket (wg set) or from Go (Device().IpcSet, then a periodic sync), the
// LAN's traffic to its former allowed IPs still reaches the PortDevice
// (its prefixes stay in the LAN XDP filter), which drops it before
// wireguard-go and counts it (no_route); the gateway host's default route
// toward the WAN router never carries it out in cleartext, as it did
// while the sync deleted the prefixes from the filter (fast-path mode's
// TestRemovedPeerNoCleartextNoTUN). Configured again, the prefix carries
// traffic through the tunnel again.
func TestRemovedPeerNoCleartext(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs two gateways")
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	wgBin := testenv.Tool(t, "wg", "wireguard-tools")
	testenv.Tool(t, "ping", "iputils-ping")
	tp := testenv.Topology(t, "cl")
	s, err := twosite.Build(tp, twosite.Config{Routed: true, NoFastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Stock.PinBind(); err != nil {
		t.Fatal(err)
	}
	fc := s.FastConfig
	f := &config.File{Interface: config.Interface{PrivateKey: fc.PrivateKey, ListenPort: fc.ListenPort}}
	for _, p := range fc.Peers {
		f.Peers = append(f.Peers, config.Peer{PublicKey: p.PublicKey, Endpoint: p.Endpoint, AllowedIPs: p.AllowedIPs})
	}
	var g *Gateway
	if err := s.GwA.Do(func() (err error) {
		g, err = Start(Config{Name: s.GwName, UAPI: f.UAPI(), ListenPort: fc.ListenPort, WAN: s.WANA, LAN: s.LANA,
			SyncInterval: 50 * time.Millisecond})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := s.GwA.AddRoute("default", "198.18.1.254", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.GwA.Forwarding(); err != nil {
		t.Fatal(err)
	}
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	wan := startCapture(t, tcpdump, s.Router, s.Router.Name+"-wanleak")
	noRoute := func() uint64 { return g.Stats().LAN.Drops[tundev.PortDropNoRoute] }
	const n = 50
	key := fc.Peers[0].PublicKey
	removed := func(how string) {
		t.Helper()
		before := noRoute()
		sendUDP(t, s.HostA, netip.AddrPortFrom(twosite.HostB4, 9305), n)
		pollUntil(5*time.Second, func() bool { return noRoute()-before >= n })
		if got := noRoute() - before; got < n {
			st := g.Stats().LAN
			t.Errorf("peer removed %s: %d datagrams to its allowed IPs, %d counted as no_route; LAN: %d read, drops %v", how, n, got, st.RXPackets, st.Drops.List())
		}
	}

	if out, err := exec.Command(wgBin, "set", s.GwName, "peer", key.String(), "remove").CombinedOutput(); err != nil {
		t.Fatalf("wg set remove: %v\n%s", err, out)
	}
	removed("over the UAPI socket")

	// Configured again, the prefix is the tunnel's again.
	uapiPeer := f.UAPI()[strings.Index(f.UAPI(), "public_key="):]
	if err := g.Device().IpcSet(uapiPeer); err != nil {
		t.Fatal(err)
	}
	if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
		t.Fatalf("after the peer came back: %v", err)
	}
	// From Go: the sync that follows finds the peer gone.
	if err := g.Device().IpcSet(fmt.Sprintf("public_key=%x\nremove=true\n", key[:])); err != nil {
		t.Fatal(err)
	}
	pfx := netip.MustParsePrefix("198.19.2.0/24")
	if !pollUntil(5*time.Second, func() bool { // a sync saw the peer gone
		g.mu.Lock()
		defer g.mu.Unlock()
		_, kept := g.kept[pfx]
		return kept || !g.prefixes[pfx]
	}) {
		t.Fatalf("no sync in 5 s saw the peer removed from Go")
	}
	removed("from Go")

	frames, leaks := wanLeaks(t, wan.stop(t))
	if frames == 0 {
		t.Error("the WAN capture holds no frame, not even the tunnel's: the leak check saw nothing")
	}
	if len(leaks) > 0 {
		t.Errorf("after the peer's removal, %d of the %d frames on the WAN carry an inner address (cleartext); the first: %s", len(leaks), frames, leaks[0])
	}
}

// capture is a tcpdump writing a pcap file.
type capture struct {
	cmd  *exec.Cmd
	file string
	done bool
}

// startCapture runs tcpdump on ns's interface that has the WAN router's
// address 198.18.1.254 and returns once it captures. In immediate mode:
// otherwise the kernel hands tcpdump its frames a ring block at a time
// (TPACKET_V3, with a timeout), and one interrupted meanwhile writes none
// of the last block's, often all of a short test's.
func startCapture(t *testing.T, tcpdump string, ns *topo.NS, file string) *capture {
	t.Helper()
	out, err := ns.Run("ip", "-o", "addr", "show")
	if err != nil {
		t.Fatal(err)
	}
	dev := ""
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 4 && strings.HasPrefix(f[3], "198.18.1.254/") {
			dev = strings.TrimSuffix(f[1], ":")
		}
	}
	if dev == "" {
		t.Fatalf("%s has no address 198.18.1.254:\n%s", ns.Name, out)
	}
	c := &capture{file: t.TempDir() + "/" + file + ".pcap"}
	c.cmd = ns.Command(tcpdump, "-i", dev, "-n", "-U", "--immediate-mode", "-B", "8192", "-w", c.file, "ip", "or", "ip6")
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.stop(t) })
	ready := make(chan error, 1)
	go func() {
		var got []byte
		buf := make([]byte, 4096)
		for {
			n, err := stderr.Read(buf)
			got = append(got, buf[:n]...)
			if bytes.Contains(got, []byte("listening on")) {
				ready <- nil
				io.Copy(io.Discard, stderr)
				return
			}
			if err != nil {
				ready <- fmt.Errorf("tcpdump on %s: %v: %s", dev, err, got)
				return
			}
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("tcpdump on %s did not start within 10 s", dev)
	}
	return c
}

// stop ends the capture and returns its file.
func (c *capture) stop(*testing.T) string {
	if !c.done {
		c.done = true
		c.cmd.Process.Signal(os.Interrupt)
		c.cmd.Wait()
	}
	return c.file
}

// wanLeaks reads a pcap file of Ethernet frames and returns a line for
// each IP packet with an address of the sites' inner networks
// (twosite.SitesNet, 2001:db8::/32) as source or destination, and how
// many frames it read. WireGuard's outer packets carry the gateways'
// addresses in 198.18.0.0/16 only.
func wanLeaks(t *testing.T, file string) (frames int, leaks []string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 24 || binary.LittleEndian.Uint32(b) != 0xa1b2c3d4 || binary.LittleEndian.Uint32(b[20:]) != 1 {
		t.Fatalf("%s: not a little-endian Ethernet pcap file", file)
	}
	doc := netip.MustParsePrefix("2001:db8::/32")
	for off := 24; off+16 <= len(b); {
		caplen := int(binary.LittleEndian.Uint32(b[off+8:]))
		if off+16+caplen > len(b) {
			break
		}
		f := b[off+16 : off+16+caplen]
		off += 16 + caplen
		frames++
		var src, dst netip.Addr
		switch {
		case len(f) >= 34 && binary.BigEndian.Uint16(f[12:]) == 0x0800:
			src, dst = netip.AddrFrom4([4]byte(f[26:30])), netip.AddrFrom4([4]byte(f[30:34]))
		case len(f) >= 54 && binary.BigEndian.Uint16(f[12:]) == 0x86dd:
			src, dst = netip.AddrFrom16([16]byte(f[22:38])), netip.AddrFrom16([16]byte(f[38:54]))
		default:
			continue
		}
		for _, a := range []netip.Addr{src, dst} {
			if twosite.SitesNet.Contains(a) || doc.Contains(a) {
				leaks = append(leaks, fmt.Sprintf("frame %d %v → %v: inner address on the WAN", frames, src, dst))
				break
			}
		}
	}
	return frames, leaks
}

// sendUDP sends n datagrams of 64 bytes from ns to dst.
func sendUDP(t *testing.T, ns *topo.NS, dst netip.AddrPort, n int) {
	t.Helper()
	var c *net.UDPConn
	if err := ns.Do(func() (err error) {
		c, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := make([]byte, 64)
	for i := range n {
		binary.BigEndian.PutUint32(b, uint32(i))
		if _, err := c.Write(b); err != nil {
			t.Fatalf("send to %v: %v", dst, err)
		}
	}
}

// pollUntil polls cond every 20 ms until it holds or timeout passes.
func pollUntil(timeout time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
