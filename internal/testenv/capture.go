package testenv

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

	"github.com/wgpio/wgpio/internal/topo"
)

// Capture is a tcpdump running in a namespace, writing a pcap file of
// Ethernet frames. Stop ends it (also at the end of the test).
type Capture struct {
	cmd     *exec.Cmd
	tcpdump string
	ns      *topo.NS
	file    string
	stopped bool
}

// StartCapture runs tcpdump (its path: Tool(t, "tcpdump", "tcpdump")) on
// dev in ns, writing file, with the capture filter's words in filter
// ("" for every frame), and returns once tcpdump captures (it fails t
// after 10 s). In immediate mode: otherwise the kernel hands tcpdump its
// frames a ring block at a time (TPACKET_V3, with a timeout), and one
// interrupted meanwhile writes none of the last block's, often all of a
// short test's (a leak check then reads an empty file).
func StartCapture(t testing.TB, tcpdump string, ns *topo.NS, dev, file, filter string) *Capture {
	t.Helper()
	args := append([]string{"-i", dev, "-n", "-U", "--immediate-mode", "-B", "8192", "-w", file}, strings.Fields(filter)...)
	cmd := ns.Command(tcpdump, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Capture{cmd: cmd, tcpdump: tcpdump, ns: ns, file: file}
	t.Cleanup(c.Stop)
	ready := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		var got []byte
		for {
			n, err := stderr.Read(buf)
			got = append(got, buf[:n]...)
			if bytes.Contains(got, []byte("listening on")) {
				ready <- nil
				io.Copy(io.Discard, stderr)
				return
			}
			if err != nil {
				ready <- fmt.Errorf("tcpdump on %s in %s: %v: %s", dev, ns.Name, err, got)
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
		t.Fatalf("tcpdump on %s in %s did not start capturing within 10 s", dev, ns.Name)
	}
	return c
}

// Stop ends the capture (once; later calls do nothing) and returns its
// file.
func (c *Capture) Stop() {
	if !c.stopped {
		c.stopped = true
		c.cmd.Process.Signal(os.Interrupt)
		c.cmd.Wait()
	}
}

// File returns the pcap file the capture writes.
func (c *Capture) File() string { return c.file }

// Lines stops the capture and returns tcpdump's one-line decodes of it,
// with tcpdump's flags added (e.g. "-v").
func (c *Capture) Lines(t testing.TB, flags ...string) []string {
	t.Helper()
	c.Stop()
	out, err := c.ns.Run(c.tcpdump, append([]string{"-n", "-r", c.file}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(out, "\n")
}

// WANLeaks reads a pcap file of Ethernet frames captured on a WAN and
// returns how many frames it read and a line for each IP packet that
// should not be there: one with an address for which inner reports true
// (a site's inner network) as source or destination, or a UDP datagram
// whose payload does not have the shape of a WireGuard message
// (IsWireGuard). WireGuard's outer packets carry the gateways' addresses
// only.
func WANLeaks(t testing.TB, file string, inner func(netip.Addr) bool) (frames int, leaks []string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 24 || binary.LittleEndian.Uint32(b) != 0xa1b2c3d4 || binary.LittleEndian.Uint32(b[20:]) != 1 {
		t.Fatalf("%s: not a little-endian Ethernet pcap file", file)
	}
	for off := 24; off+16 <= len(b); {
		caplen := int(binary.LittleEndian.Uint32(b[off+8:]))
		if off+16+caplen > len(b) {
			break
		}
		f := b[off+16 : off+16+caplen]
		off += 16 + caplen
		frames++
		if len(f) < 14 {
			continue
		}
		var src, dst netip.Addr
		var proto int
		var l4 []byte
		switch binary.BigEndian.Uint16(f[12:]) {
		case 0x0800:
			ip := f[14:]
			if len(ip) < 20 {
				continue
			}
			ihl := int(ip[0]&15) * 4
			src, dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
			proto, l4 = int(ip[9]), ip[min(ihl, len(ip)):]
		case 0x86dd:
			ip := f[14:]
			if len(ip) < 40 {
				continue
			}
			src, dst = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
			proto, l4 = int(ip[6]), ip[40:]
		default:
			continue
		}
		where := fmt.Sprintf("frame %d %v → %v proto %d", frames, src, dst, proto)
		if inner(src) || inner(dst) {
			leaks = append(leaks, where+": inner address on the WAN")
			continue
		}
		if proto != 17 || len(l4) < 8 {
			continue
		}
		if msg := l4[8:]; !IsWireGuard(msg) {
			leaks = append(leaks, fmt.Sprintf("%s: UDP %d → %d payload of %d bytes is not a WireGuard message", where,
				binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:]), len(msg)))
		}
	}
	return frames, leaks
}

// IsWireGuard reports whether msg has the shape of a WireGuard message
// (whitepaper §5.4: type, three zero bytes, the type's length).
func IsWireGuard(msg []byte) bool {
	if len(msg) < 4 || msg[1] != 0 || msg[2] != 0 || msg[3] != 0 {
		return false
	}
	switch msg[0] {
	case 1:
		return len(msg) == 148
	case 2:
		return len(msg) == 92
	case 3:
		return len(msg) == 64
	case 4:
		return len(msg) >= 32 && (len(msg)-32)%16 == 0
	}
	return false
}

// SendUDP sends n datagrams of 64 bytes (a sequence number first) from
// ns to dst; it fails t if one cannot be sent.
func SendUDP(t testing.TB, ns *topo.NS, dst netip.AddrPort, n int) {
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

// PollUntil polls cond every 20 ms until it holds (true) or timeout
// passes (false).
func PollUntil(timeout time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
