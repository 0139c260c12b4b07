package dataplanetest

import (
	"encoding/hex"
	"net"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
)

// TestIPChecksum checks the Internet checksum against the worked example of
// an IPv4 header (192.168.0.1 to 192.168.0.199, checksum 0xb861) used in
// RFC 1071 tutorials and Wikipedia's "IPv4 header checksum".
func TestIPChecksum(t *testing.T) {
	hdr, _ := hex.DecodeString("450000730000400040110000c0a80001c0a800c7")
	if got := ipChecksum(hdr); got != 0xb861 {
		t.Errorf("ipChecksum(header) = %#04x, want 0xb861", got)
	}
	hdr[10], hdr[11] = 0xb8, 0x61
	if got := ipChecksum(hdr); got != 0 {
		t.Errorf("ipChecksum(header with checksum) = %#04x, want 0", got)
	}
}

func TestBuildParseReflect(t *testing.T) {
	p, err := dataplane.NewPool(make([]byte, 4*2048), 2048, 256)
	if err != nil {
		t.Fatal(err)
	}
	c := dataplane.NewCache(p)
	ea := endpoint{mac: net.HardwareAddr{2, 0, 0, 0, 0, 0xa}, ip: netip.MustParseAddr("198.18.0.1"), port: 40000}
	eb := endpoint{mac: net.HardwareAddr{2, 0, 0, 0, 0, 0xb}, ip: netip.MustParseAddr("198.18.0.2"), port: 50000}
	for _, size := range []int{0, 61, 64, 1514} {
		f, _ := c.AllocFrame()
		want := tag{dir: dirAB, flow: 3, seq: 77}
		if !build(&f, size, ea, eb, want) {
			t.Fatalf("build(%d) = false", size)
		}
		if got, ok := parse(f.Data(), eb); !ok || got != want {
			t.Errorf("parse(build(%d)) = %+v, %v; want %+v, true", size, got, ok, want)
		}
		if _, ok := parse(f.Data(), ea); ok {
			t.Errorf("parse of a frame for b as a = ok, want not ok")
		}
		reflect(f.Data())
		want.dir = dirBA
		if got, ok := parse(f.Data(), ea); !ok || got != want {
			t.Errorf("parse(reflect(build(%d))) = %+v, %v; want %+v, true", size, got, ok, want)
		}
		f.Data()[len(f.Data())-1] ^= 1
		if _, ok := parse(f.Data(), ea); ok && len(f.Data()) > minFrame {
			t.Errorf("parse of a corrupted payload = ok")
		}
		c.FreeFrames([]dataplane.Frame{f})
	}
}
