package gen

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"golang.org/x/net/ipv4"
)

func testConfig(size int) Config {
	return Config{
		SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("198.18.1.2"), Dst: netip.MustParseAddr("198.18.3.2"),
		SrcPort: 10000, DstPort: 9000, Flows: 4, FirstFlow: 8, Size: size,
	}
}

// TestIPChecksum checks the header sum against the worked example of
// RFC 1071's reference (the classic IPv4 header from Wikipedia's "IPv4
// header checksum" article, whose checksum is 0xb861).
func TestIPChecksum(t *testing.T) {
	h := []byte{0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}
	if got, want := ipChecksum(h), uint16(0xb861); got != want {
		t.Errorf("ipChecksum(example) = %#04x, want %#04x", got, want)
	}
}

// TestFrames checks every built frame with x/net's IPv4 header parser.
func TestFrames(t *testing.T) {
	for _, size := range []int{MinSize, 64, 512, 1420, MaxSize} {
		g, err := New(testConfig(size))
		if err != nil {
			t.Fatalf("New(size %d) = %v", size, err)
		}
		for flow, b := range g.templates {
			if len(b) != 14+size {
				t.Fatalf("frame length = %d, want %d", len(b), 14+size)
			}
			h, err := ipv4.ParseHeader(b[14:])
			if err != nil {
				t.Fatalf("ParseHeader(size %d) = %v", size, err)
			}
			if h.TotalLen != size || h.Protocol != 17 || h.Src.String() != "198.18.1.2" || h.Dst.String() != "198.18.3.2" {
				t.Errorf("size %d header = %+v", size, h)
			}
			if got := ipChecksum(b[14:34]); got != 0 {
				t.Errorf("size %d: header sum over a filled checksum = %#x, want 0", size, got)
			}
			udp := b[34:]
			if got, want := binary.BigEndian.Uint16(udp), uint16(10000+flow); got != want {
				t.Errorf("source port = %d, want %d", got, want)
			}
			if got, want := int(binary.BigEndian.Uint16(udp[4:])), size-20; got != want {
				t.Errorf("UDP length = %d, want %d", got, want)
			}
			p, ok := ParsePayload(udp[8:])
			if !ok || p.Flow != uint32(8+flow) {
				t.Errorf("ParsePayload = %+v, %v; want flow %d", p, ok, 8+flow)
			}
		}
	}
}

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"too small", func(c *Config) { c.Size = MinSize - 1 }},
		{"too large", func(c *Config) { c.Size = MaxSize + 1 }},
		{"IPv6", func(c *Config) { c.Src = netip.MustParseAddr("2001:db8::1") }},
		{"short MAC", func(c *Config) { c.DstMAC = c.DstMAC[:4] }},
		{"ports overflow", func(c *Config) { c.SrcPort = 65535 }},
	} {
		c := testConfig(64)
		tc.mod(&c)
		if _, err := New(c); err == nil {
			t.Errorf("New(%s) = nil error, want one", tc.name)
		}
	}
}

func TestParsePayload(t *testing.T) {
	good := make([]byte, PayloadLen)
	binary.BigEndian.PutUint32(good, Magic)
	binary.BigEndian.PutUint32(good[4:], 7)
	binary.BigEndian.PutUint32(good[8:], 3)
	binary.BigEndian.PutUint64(good[16:], 99)
	for _, tc := range []struct {
		name string
		in   []byte
		want Payload
		ok   bool
	}{
		{"good", good, Payload{Run: 7, Flow: 3, Seq: 99}, true},
		{"short", good[:PayloadLen-1], Payload{}, false},
		{"no magic", append([]byte{0}, good[1:]...), Payload{}, false},
		{"empty", nil, Payload{}, false},
	} {
		got, ok := ParsePayload(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParsePayload(%s) = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParsePayload(f *testing.F) {
	good := make([]byte, PayloadLen)
	binary.BigEndian.PutUint32(good, Magic)
	f.Add(good)                 // a run 0, flow 0, sequence 0 header
	f.Add([]byte{})             // nothing
	f.Add([]byte("WGPB short")) // magic, then too short
	f.Fuzz(func(t *testing.T, b []byte) {
		p, ok := ParsePayload(b)
		if !ok && p != (Payload{}) {
			t.Errorf("ParsePayload = %+v, false; want the zero Payload", p)
		}
		if ok && len(b) < PayloadLen {
			t.Errorf("ParsePayload(%d bytes) = ok", len(b))
		}
	})
}

// TestRunMemport sends at a fixed rate over a memport pair and checks what
// arrives: the count, each flow's sequence numbers in order, the run tag.
// The run is ended by its context once the receiver has had enough
// frames, not by a duration: a run of 200 ms sent nothing on a loaded
// machine (Sent = 0: its thread, asleep after its first look at the
// clock, was not run again within the 200 ms). A run ended by its
// duration follows, which must pace likewise.
func TestRunMemport(t *testing.T) {
	a, b, err := memport.NewPair(memport.Config{RingSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	g, err := New(testConfig(64))
	if err != nil {
		t.Fatal(err)
	}
	// enough frames received end the run (some 500 rounds of the
	// flows); hang bounds a run that ignores its context and decides
	// nothing else.
	const rate, enough, hang = 20000.0, 2000, time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	next := map[uint32]uint64{}
	var got uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		rx := b.Queue(0).RX()
		frames := make([]dataplane.Frame, 64)
		// Run returns before stop closes, and memport's Transmit puts a
		// frame in the ring before it returns: once stop is seen, one
		// more pass takes all that Run sent. (Receive of no frames
		// returns 0 whatever waits: it cannot tell.)
		stopped := false
		for {
			n := rx.Receive(frames)
			for i := range n {
				p, ok := ParsePayload(frames[i].Data()[42:])
				if !ok || p.Run != 5 || p.Seq != next[p.Flow] {
					t.Errorf("received %+v (ok %v), want run 5, seq %d", p, ok, next[p.Flow])
				}
				next[p.Flow] = p.Seq + 1
				got++
			}
			rx.Free(frames[:n])
			if got >= enough {
				cancel()
			}
			if n == 0 {
				if stopped {
					return
				}
				select {
				case <-stop:
					stopped = true
				default:
					time.Sleep(100 * time.Microsecond)
				}
			}
		}
	}()
	rep := g.Run(ctx, a.Queue(0).TX(), 5, rate, hang)
	close(stop)
	<-done
	if rep.Elapsed >= hang {
		t.Errorf("Run lasted %v (its duration), its context cancelled once %d frames were received", rep.Elapsed, enough)
	}
	if rep.Sent != got {
		t.Errorf("Run sent %d, receiver got %d", rep.Sent, got)
	}
	// The rate itself is not checked here (no timed tests); only that
	// the pacing never runs ahead of it.
	if ach := rep.Achieved(); rep.Sent < enough || ach > 1.05*rate {
		t.Errorf("Sent = %d, Achieved() = %.0f pps; want at least %d, at most %.0f pps", rep.Sent, ach, enough, rate)
	}
	checkPerFlow(t, rep)

	// Ended by its duration (what the ring or the pool cannot take is
	// counted as Short; nothing receives).
	const d = 20 * time.Millisecond
	rep = g.Run(context.Background(), a.Queue(0).TX(), 6, rate, d)
	if rep.Elapsed < d {
		t.Errorf("Run for %v returned after %v", d, rep.Elapsed)
	}
	if ach := rep.Achieved(); ach > 1.05*rate {
		t.Errorf("Run for %v: Sent = %d, Achieved() = %.0f pps; want at most %.0f pps", d, rep.Sent, ach, rate)
	}
	checkPerFlow(t, rep)
}

// checkPerFlow checks that rep's frames sent per flow add up to Sent.
func checkPerFlow(t *testing.T, rep Report) {
	t.Helper()
	var sum uint64
	for _, n := range rep.PerFlow {
		sum += n
	}
	if sum != rep.Sent {
		t.Errorf("run %d: PerFlow adds up to %d, want Sent %d", rep.Run, sum, rep.Sent)
	}
}
