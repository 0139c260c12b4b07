//go:build linux

package toobig

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/header"
)

// TestLinkSourceChecks: ListenLink's reader returns the ICMPv6 message of
// an IPv6 packet whose checksum verifies, and skips one whose checksum
// does not, one with another next header, and one cut short (its payload
// length past the bytes read), as the kernel checks an ICMPv6 message for
// its sockets.
func TestLinkSourceChecks(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	src := linkSource{os.NewFile(uintptr(fds[0]), "a")}
	defer src.Close()
	w := os.NewFile(uintptr(fds[1]), "b")
	defer w.Close()
	msg := tooBig(1400, ours, peer, 51820, 0)
	packet := func(m []byte, sum bool) []byte {
		p := make([]byte, header.IPv6Len, header.IPv6Len+len(m))
		p[0], p[6], p[7] = 0x60, header.ProtoICMPv6, 255
		binary.BigEndian.PutUint16(p[4:6], uint16(len(m)))
		s, d := router.As16(), ours.As16()
		copy(p[8:24], s[:])
		copy(p[24:40], d[:])
		p = append(p, m...)
		c := p[header.IPv6Len:]
		c[2], c[3] = 0, 0
		binary.BigEndian.PutUint16(c[2:4], ^header.FoldChecksum(header.Checksum(c, header.PseudoHeaderChecksumBytes(header.ProtoICMPv6, p[8:24], p[24:40], len(c)))))
		if !sum {
			c[3] ^= 1
		}
		return p
	}
	bad := packet(msg, false)
	other := packet(msg, true)
	other[6] = header.ProtoUDP
	cut := packet(msg, true)
	cut = cut[:len(cut)-1]
	good := packet(msg, true)
	for _, p := range [][]byte{bad, other, cut, good} {
		if _, err := w.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	src.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1500)
	got, from, err := src.ReadMessage(buf)
	if err != nil || from != router || !bytes.Equal(got, good[header.IPv6Len:]) {
		t.Fatalf("ReadMessage = %x, %v, %v; want the good message from %v", got, from, err, router)
	}
	if tb, ok := Parse(got); !ok || tb.MTU != 1400 || tb.Dst != peer {
		t.Errorf("Parse = %+v, %v", tb, ok)
	}
}
