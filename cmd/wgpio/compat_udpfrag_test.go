//go:build linux

package main

import (
	"bytes"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestFragBindFragments: compat-mqtun's UDP sockets (stock wireguard-go's
// StdNetBind under fragBind) over a link of MTU 1280 send a batch of
// four 1400-byte datagrams to one endpoint, a UDP GSO send with segments
// over the MTU, and each arrives whole, reassembled from the kernel's
// fragments, seen on the far side: IPv4 fragments without DF, IPv6 ones
// with a Fragment header (RFC 8200 §4.5); an IPv4 datagram that fits
// leaves without DF, as the kernel's WireGuard sends its outer packets.
// Without fragBind the batches fail with EMSGSIZE (nothing arrives) and
// the IPv4 datagram that fits carries DF. The sockets of a second Open
// (the listen port moved) get the same. One Bind per family: stock
// wireguard-go's StdNetBind sends an IPv6 datagram after an IPv4 one to
// a wrong address at times (its pooled net.UDPAddr keeps the IPv4
// length, and only 4 bytes of the IPv6 address are copied into it).
func TestFragBindFragments(t *testing.T) {
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	tp := testenv.Topology(t, "uf")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	v, err := tp.NewVeth(a, b, topo.VethConfig{MTU: 1280, KeepTXOffload: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct {
		ns           *topo.NS
		dev          string
		addr4, addr6 string
	}{{a, v.A, "198.18.1.1/24", "2001:db8:f::1/64"}, {b, v.B, "198.18.1.2/24", "2001:db8:f::2/64"}} {
		if err := e.ns.AddAddr(e.dev, e.addr4); err != nil {
			t.Fatal(err)
		}
		if err := e.ns.AddAddr(e.dev, e.addr6); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, network, dst string
		// frag is what tcpdump -v says of each fragment.
		frag func(line string) bool
	}{
		{"ipv4", "udp4", "198.18.1.2:9999", func(l string) bool {
			// The first fragment has MF, the second the offset.
			return strings.Contains(l, "flags [+]") || strings.Contains(l, "offset 1256")
		}},
		{"ipv6", "udp6", "[2001:db8:f::2]:9999", func(l string) bool { return strings.Contains(l, "frag (") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testFragBindFragments(t, tcpdump, a, b, v.B, tc.network, tc.dst, tc.frag)
		})
	}
}

func testFragBindFragments(t *testing.T, tcpdump string, a, b *topo.NS, devB, network, dst string, frag func(string) bool) {
	var rx *net.UDPConn
	if err := b.Do(func() (err error) {
		rx, err = net.ListenUDP(network, &net.UDPAddr{Port: 9999})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	var logs testenv.LogBuffer
	fb := &fragBind{Bind: conn.NewDefaultBind(), log: slog.New(slog.NewTextHandler(&logs, nil))}
	open := func() {
		t.Helper()
		if err := a.Do(func() error {
			_, _, err := fb.Open(0)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	open()
	defer fb.Close()
	ep, err := fb.ParseEndpoint(dst)
	if err != nil {
		t.Fatal(err)
	}
	receive := func(tag byte, size int) bool {
		t.Helper()
		buf := make([]byte, 2048)
		// A bound on a datagram's never arriving only.
		rx.SetReadDeadline(time.Now().Add(10 * time.Second))
		m, _, err := rx.ReadFromUDP(buf)
		if err != nil {
			t.Errorf("datagram of %d bytes %#x to %s: %v", size, tag, dst, err)
			return false
		}
		if m != size || buf[0] != tag {
			t.Errorf("datagram to %s: %d bytes of %#x, want %d of %#x", dst, m, buf[0], size, tag)
		}
		return true
	}
	const n, size = 4, 1400
	for round, tag := range []byte{0x10, 0x40} {
		if round == 1 {
			// The listen port moves: wireguard-go closes the Bind and
			// opens it again.
			fb.Close()
			open()
		}
		file := t.TempDir() + "/wan.pcap"
		capture := testenv.StartCapture(t, tcpdump, b, devB, file, "ip or ip6")
		// As wireguard-go's: slices of larger buffers (StdNetBind
		// coalesces a batch into its first buffer's spare capacity).
		bufs := make([][]byte, n)
		for i := range bufs {
			bufs[i] = append(make([]byte, 0, n*size), bytes.Repeat([]byte{tag + byte(i)}, size)...)
		}
		if err := fb.Send(bufs, ep); err != nil {
			t.Errorf("round %d: send %d datagrams of %d bytes to %s over MTU 1280: %v", round, n, size, dst, err)
		}
		for i := range n {
			if !receive(tag+byte(i), size) {
				break
			}
		}
		if err := fb.Send([][]byte{bytes.Repeat([]byte{tag + 0x20}, 100)}, ep); err != nil {
			t.Errorf("round %d: send a datagram of 100 bytes: %v", round, err)
		}
		receive(tag+0x20, 100)
		var frags, whole int
		var lines []string
		count := func() bool {
			out, _ := exec.Command(tcpdump, "-n", "-v", "-r", file).Output()
			lines = strings.Split(string(out), "\n")
			frags, whole = 0, 0
			for _, l := range lines {
				switch {
				case frag(l):
					frags++
				case strings.Contains(l, "length 128") && strings.Contains(l, "proto UDP"):
					whole++ // IPv4's 100 + 28 bytes
				}
			}
			return frags >= 2*n && (network != "udp4" || whole >= 1)
		}
		// tcpdump writes what it captured a moment later: a bound on
		// its never writing them only.
		testenv.PollUntil(10*time.Second, count)
		capture.Stop()
		count()
		for _, l := range lines {
			if strings.Contains(l, "[DF]") {
				t.Errorf("round %d: an outer packet with DF: %s", round, l)
			}
		}
		// The kernel cuts each datagram in two: IPv4 packets of 1276 and
		// 172 bytes, IPv6 ones of 1280 and 224.
		if frags != 2*n {
			t.Errorf("round %d: %d fragments of %d datagrams of %d bytes over MTU 1280, want %d:\n%s\nlog: %s",
				round, frags, n, size, 2*n, strings.Join(lines, "\n"), logs.String())
		}
		if network == "udp4" && whole != 1 {
			t.Errorf("round %d: %d IPv4 datagrams of 100 bytes without DF seen, want 1:\n%s", round, whole, strings.Join(lines, "\n"))
		}
	}
	if got := strings.Count(logs.String(), "EMSGSIZE"); got != 2 {
		t.Errorf("%d log lines say a batch was over the path MTU, want 2 (one after each Open):\n%s", got, logs.String())
	}
}
