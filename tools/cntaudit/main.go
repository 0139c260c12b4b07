//go:build linux

// Command cntaudit injects and counts crafted frames for the packet
// conservation audit of a running wgpio gateway (session 22). Run it
// inside a namespace (ip netns exec).
//
//	cntaudit send -if IF -dst MAC -kind KIND -n N   frames on an Ethernet or TUN interface
//	cntaudit count -if IF -dur 3s                  incoming UDP frames carrying the marker
//	cntaudit wan -if IF -dst MAC -kind KIND -n N    outer UDP to the gateway (capture first)
//
// Linux only (AF_PACKET): every file is built for Linux alone.
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/crypto/blake2s"

	"github.com/wgpio/wgpio/header"
)

var marker = []byte("CNTAUDIT")

// pktSize is -size: the length of kind len4.
var pktSize = 100

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// csum is the Internet checksum of b started from init (RFC 1071).
func csum(b []byte, init uint32) uint16 { return ^header.FoldChecksum(header.Checksum(b, init)) }

func payload(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = marker[i%8]
	}
	return p
}

// udp4 builds an IPv4 UDP packet of total length size.
func udp4(src, dst netip.Addr, size int, ttl byte, df bool) []byte {
	p := make([]byte, size)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(size))
	binary.BigEndian.PutUint16(p[4:], 0x1234)
	if df {
		p[6] = 0x40
	}
	p[8] = ttl
	p[9] = 17
	copy(p[12:], src.AsSlice())
	copy(p[16:], dst.AsSlice())
	binary.BigEndian.PutUint16(p[10:], csum(p[:20], 0))
	putUDP(p[20:], p[12:16], p[16:20])
	return p
}

// putUDP writes into u a UDP header (port 40000 to 9) and the marker
// payload filling it, with its checksum over the pseudo-header of src
// and dst (RFC 768, RFC 8200 §8.1).
func putUDP(u, src, dst []byte) {
	binary.BigEndian.PutUint16(u[0:], 40000)
	binary.BigEndian.PutUint16(u[2:], 9)
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	copy(u[8:], payload(len(u)-8))
	c := csum(u, header.PseudoHeaderChecksumBytes(17, src, dst, len(u)))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:], c)
}

func udp6(src, dst netip.Addr, size int, hop byte) []byte {
	p := make([]byte, size)
	p[0] = 0x60
	binary.BigEndian.PutUint16(p[4:], uint16(size-40))
	p[6] = 17
	p[7] = hop
	copy(p[8:], src.AsSlice())
	copy(p[24:], dst.AsSlice())
	putUDP(p[40:], p[8:24], p[24:40])
	return p
}

func fix4(p []byte) []byte {
	p[10], p[11] = 0, 0
	ihl := int(p[0]&15) * 4
	if ihl > len(p) {
		ihl = 20
	}
	binary.BigEndian.PutUint16(p[10:], csum(p[:ihl], 0))
	return p
}

// packet returns the IP packet (ethertype, bytes) of a kind.
func packet(kind string, src4, dst4, src6, dst6 netip.Addr) (uint16, []byte) {
	switch kind {
	case "valid4":
		return 0x0800, udp4(src4, dst4, 100, 64, false)
	case "valid6":
		return 0x86dd, udp6(src6, dst6, 100, 64)
	case "trunc4": // 12 bytes of an IPv4 header
		return 0x0800, udp4(src4, dst4, 100, 64, false)[:12]
	case "trunc6": // 30 bytes of an IPv6 header
		return 0x86dd, udp6(src6, dst6, 100, 64)[:30]
	case "ihl4": // IHL 4
		p := udp4(src4, dst4, 100, 64, false)
		p[0] = 0x44
		return 0x0800, fix4(p)
	case "ihl15": // IHL 15 in a 100-byte packet (fits) but options garbage
		p := udp4(src4, dst4, 100, 64, false)
		p[0] = 0x4f
		return 0x0800, fix4(p)
	case "ihlbig": // IHL 15 past a 50-byte packet's total length
		p := udp4(src4, dst4, 50, 64, false)
		p[0] = 0x4f
		return 0x0800, fix4(p)
	case "totlong4": // total length past the packet
		p := udp4(src4, dst4, 100, 64, false)
		binary.BigEndian.PutUint16(p[2:], 400)
		return 0x0800, fix4(p)
	case "totshort4": // total length below the header
		p := udp4(src4, dst4, 100, 64, false)
		binary.BigEndian.PutUint16(p[2:], 12)
		return 0x0800, fix4(p)
	case "csum4":
		p := udp4(src4, dst4, 100, 64, false)
		p[10] ^= 0x55
		return 0x0800, p
	case "ver4in6": // ethertype IPv6, version 4
		return 0x86dd, udp4(src4, dst4, 100, 64, false)
	case "plen6": // payload length past the packet
		p := udp6(src6, dst6, 100, 64)
		binary.BigEndian.PutUint16(p[4:], 600)
		return 0x86dd, p
	case "ttl1":
		return 0x0800, udp4(src4, dst4, 100, 1, false)
	case "hop1":
		return 0x86dd, udp6(src6, dst6, 100, 1)
	case "big4df":
		return 0x0800, udp4(src4, dst4, 1500, 64, true)
	case "big4":
		return 0x0800, udp4(src4, dst4, 1500, 64, false)
	case "big6":
		return 0x86dd, udp6(src6, dst6, 1500, 64)
	case "mid4df": // fits the tunnel (1420), not a 1300 LAN
		return 0x0800, udp4(src4, dst4, 1400, 64, true)
	case "mid4":
		return 0x0800, udp4(src4, dst4, 1400, 64, false)
	case "len4": // -size bytes, no DF
		return 0x0800, udp4(src4, dst4, pktSize, 64, false)
	case "mid6":
		return 0x86dd, udp6(src6, dst6, 1400, 64)
	case "nonip":
		return 0x88b5, payload(100)
	case "arp-garbage":
		return 0x0806, payload(10)
	}
	fatal("unknown kind %q", kind)
	return 0, nil
}

func fatal(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "cntaudit: "+f+"\n", a...)
	os.Exit(1)
}

func packetSocket(ifname string, proto uint16) (int, *syscall.SockaddrLinklayer) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		fatal("%v", err)
	}
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(htons(proto)))
	if err != nil {
		fatal("socket: %v", err)
	}
	sa := &syscall.SockaddrLinklayer{Protocol: htons(proto), Ifindex: ifi.Index}
	if err := syscall.Bind(fd, sa); err != nil {
		fatal("bind: %v", err)
	}
	return fd, sa
}

func isTUN(ifname string) bool {
	b, _ := os.ReadFile("/sys/class/net/" + ifname + "/type")
	return bytes.HasPrefix(b, []byte("65534"))
}

func main() {
	if len(os.Args) < 2 {
		fatal("send | count | wan")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	ifname := fs.String("if", "", "interface")
	dstMAC := fs.String("dst", "", "destination MAC")
	kind := fs.String("kind", "valid4", "kind")
	n := fs.Int("n", 100, "frames")
	vlan := fs.Int("vlan", -1, "802.1Q VID to tag with")
	src4 := fs.String("src4", "198.19.221.10", "")
	dst4 := fs.String("dst4", "198.19.222.1", "")
	src6 := fs.String("src6", "2001:db8:221::10", "")
	dst6 := fs.String("dst6", "2001:db8:222::1", "")
	dur := fs.Duration("dur", 3*time.Second, "count for")
	size := fs.Int("size", 100, "count: the size of each packet sent (a GRO packet counts as its segments)")
	gap := fs.Duration("gap", 0, "between frames")
	capIf := fs.String("capif", "", "wan: interface to capture a transport data frame on (outgoing)")
	fs.Parse(os.Args[2:])
	pktSize = *size
	switch os.Args[1] {
	case "send":
		et, p := packet(*kind, netip.MustParseAddr(*src4), netip.MustParseAddr(*dst4), netip.MustParseAddr(*src6), netip.MustParseAddr(*dst6))
		send(*ifname, *dstMAC, et, p, *vlan, *n, *gap)
	case "count":
		count(*ifname, *dur, *size)
	case "wan":
		wan(*ifname, *capIf, *kind, *n, *gap)
	}
}

func send(ifname, dst string, et uint16, p []byte, vlan, n int, gap time.Duration) {
	fd, sa := packetSocket(ifname, 0)
	var frame []byte
	if isTUN(ifname) {
		frame = p
		sa.Protocol = htons(et)
	} else {
		mac, err := net.ParseMAC(dst)
		if err != nil {
			fatal("-dst: %v", err)
		}
		ifi, _ := net.InterfaceByName(ifname)
		frame = append(frame, mac...)
		frame = append(frame, ifi.HardwareAddr...)
		if vlan >= 0 {
			frame = binary.BigEndian.AppendUint16(frame, 0x8100)
			frame = binary.BigEndian.AppendUint16(frame, uint16(vlan))
		}
		frame = binary.BigEndian.AppendUint16(frame, et)
		frame = append(frame, p...)
		sa.Halen = 6
		copy(sa.Addr[:], mac)
	}
	for i := 0; i < n; i++ {
		if err := syscall.Sendto(fd, frame, 0, sa); err != nil {
			fatal("sendto %d: %v", i, err)
		}
		if gap > 0 {
			time.Sleep(gap)
		}
	}
	fmt.Printf("sent %d frames of %d bytes\n", n, len(frame))
}

// count counts incoming frames with a UDP packet (or fragment) carrying
// the marker, for dur.
func count(ifname string, dur time.Duration, size int) {
	fd, _ := packetSocket(ifname, 3) // ETH_P_ALL
	tun := isTUN(ifname)
	tv := syscall.NsecToTimeval(int64(100 * time.Millisecond))
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	buf := make([]byte, 65536)
	end := time.Now().Add(dur)
	got, frags := 0, 0
	for time.Now().Before(end) {
		m, from, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			continue
		}
		ll, _ := from.(*syscall.SockaddrLinklayer)
		if ll == nil || ll.Pkttype == 4 { // PACKET_OUTGOING
			continue
		}
		f := buf[:m]
		if !tun {
			if len(f) < 14 {
				continue
			}
			f = f[14:]
		}
		if len(f) < 40 || !bytes.Contains(f, marker) {
			continue
		}
		segs := 1
		switch f[0] >> 4 {
		case 4:
			if f[9] != 17 {
				continue
			}
			if binary.BigEndian.Uint16(f[6:])&0x3fff != 0 {
				frags++
			} else if ul := int(binary.BigEndian.Uint16(f[24:])); ul-8 > size-28 {
				segs = (ul - 8 + size - 29) / (size - 28) // UDP GRO at a TUN
			}
		case 6:
			if f[6] != 17 && f[6] != 44 {
				continue
			}
			if f[6] == 44 {
				frags++
			} else if ul := int(binary.BigEndian.Uint16(f[44:])); ul-8 > size-48 {
				segs = (ul - 8 + size - 49) / (size - 48)
			}
		default:
			continue
		}
		got += segs
	}
	fmt.Printf("delivered %d (fragments %d)\n", got, frags)
}

// wan captures one outgoing WireGuard transport data frame on capIf, then
// sends n frames derived from it by kind out of ifname.
func wan(ifname, capIf, kind string, n int, gap time.Duration) {
	var frame []byte
	if kind != "garbage" && kind != "short" && kind != "type9" && kind != "short4" && kind != "init-short" && kind != "init-mac1" && kind != "init-nomac" {
		cfd, _ := packetSocket(capIf, 3)
		buf := make([]byte, 65536)
		for frame == nil {
			m, from, err := syscall.Recvfrom(cfd, buf, 0)
			if err != nil {
				fatal("capture: %v", err)
			}
			ll := from.(*syscall.SockaddrLinklayer)
			f := buf[:m]
			if ll.Pkttype != 4 || len(f) < 14+20+8+32 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[14+9] != 17 {
				continue
			}
			if binary.LittleEndian.Uint32(f[14+28:]) == 4 {
				frame = append([]byte(nil), f...)
			}
		}
		syscall.Close(cfd)
	}
	fd, sa := packetSocket(ifname, 0)
	var tmpl []byte
	if frame != nil {
		tmpl = frame
	} else {
		// A UDP frame to the gateway built from scratch: addresses from
		// the flags' defaults of the WAN link.
		tmpl = wanFrame(ifname)
	}
	sa.Halen = 6
	copy(sa.Addr[:], tmpl[0:6])
	mk := func(i int) []byte {
		f := append([]byte(nil), tmpl...)
		wg := f[14+28:]
		switch kind {
		case "replay":
		case "badtag":
			wg[len(wg)-1] ^= 0xff
		case "badctr": // a fresh counter, far ahead, bad tag
			binary.LittleEndian.PutUint64(wg[8:], binary.LittleEndian.Uint64(wg[8:])+uint64(1000+i))
		case "unknownidx":
			binary.LittleEndian.PutUint32(wg[4:], 0xdead0000+uint32(i))
		case "garbage":
			f = f[:14+28]
			g := make([]byte, 64+i%200)
			rand.Read(g)
			g[0] = byte(5 + i%250)
			f = append(f, g...)
		case "short": // 3 bytes
			f = append(f[:14+28], 4, 0, 0)
		case "short4": // transport data header without a tag
			f = append(f[:14+28], 4, 0, 0, 0, 1, 2, 3, 4, 1, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9)
		case "init-short": // a handshake initiation of 100 bytes
			f = append(f[:14+28], make([]byte, 100)...)
			f[14+28] = 1
		case "type9":
			f = append(f[:14+28], 9, 0, 0, 0, 1, 2, 3, 4)
		case "init-nomac", "init-mac1": // handshake initiation, garbage inside
			m := make([]byte, 148)
			rand.Read(m)
			copy(m, []byte{1, 0, 0, 0})
			if kind == "init-mac1" {
				k := mac1Key()
				h, _ := blake2s.New128(k[:])
				h.Write(m[:116])
				copy(m[116:132], h.Sum(nil))
				clear(m[132:])
			}
			f = append(f[:14+28], m...)
		default:
			fatal("wan kind %q", kind)
		}
		// Fix the IP and UDP lengths, checksum 0.
		ip := f[14:]
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], csum(ip[:20], 0))
		binary.BigEndian.PutUint16(ip[24:], uint16(len(ip)-20))
		ip[26], ip[27] = 0, 0
		return f
	}
	for i := 0; i < n; i++ {
		if err := syscall.Sendto(fd, mk(i), 0, sa); err != nil {
			fatal("sendto: %v", err)
		}
		if gap > 0 {
			time.Sleep(gap)
		}
	}
	fmt.Printf("sent %d %s frames\n", n, kind)
}

// wanFrame: the peer's WAN (cntw0 198.18.221.2:51820) to the gateway
// (198.18.221.1:51820), MAC from the environment CNT_GWMAC.
func wanFrame(ifname string) []byte {
	mac, err := net.ParseMAC(os.Getenv("CNT_GWMAC"))
	if err != nil {
		fatal("CNT_GWMAC: %v", err)
	}
	ifi, _ := net.InterfaceByName(ifname)
	f := append([]byte(nil), mac...)
	f = append(f, ifi.HardwareAddr...)
	f = append(f, 8, 0)
	ip := make([]byte, 28)
	ip[0] = 0x45
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:], netip.MustParseAddr("198.18.221.2").AsSlice())
	copy(ip[16:], netip.MustParseAddr("198.18.221.1").AsSlice())
	binary.BigEndian.PutUint16(ip[20:], 40001)
	binary.BigEndian.PutUint16(ip[22:], 51820)
	return append(f, ip...)
}

// mac1Key is HASH(LABEL_MAC1 || S_pub of the gateway), the gateway's
// public key from CNT_GWPUB (base64).
func mac1Key() [32]byte {
	pub, err := decode64(os.Getenv("CNT_GWPUB"))
	if err != nil || len(pub) != 32 {
		fatal("CNT_GWPUB: %v", err)
	}
	h, _ := blake2s.New256(nil)
	h.Write([]byte("mac1----"))
	h.Write(pub)
	var k [32]byte
	copy(k[:], h.Sum(nil))
	return k
}

func decode64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
