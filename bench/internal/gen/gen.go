package gen

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"time"

	"github.com/wgpio/wgpio/dataplane"
)

// Frame layout sizes in bytes.
const (
	ethLen  = 14
	ipv4Len = 20
	udpLen  = 8
	// PayloadLen is the length of the bench header at the start of the UDP
	// payload: magic (4), run tag (4), flow (4), reserved (4), sequence (8).
	PayloadLen = 24
	// MinSize is the smallest IPv4 packet the generator builds.
	MinSize = ipv4Len + udpLen + PayloadLen
	// MaxSize is the largest (a 1500-byte Ethernet MTU).
	MaxSize = 1500

	// Magic marks the bench payload ("WGPB").
	Magic uint32 = 0x57475042

	burst = 64
	// tick is how long the pacing loop sleeps when it is ahead.
	tick = 200 * time.Microsecond
)

// Payload is the bench header of a generated packet.
type Payload struct {
	Run  uint32 // tag of the run (offered-load step) that sent it
	Flow uint32 // inner flow number, FirstFlow..FirstFlow+Flows-1
	Seq  uint64 // per-flow sequence number, from 0
}

// ParsePayload reads the bench header at the start of a UDP payload. ok is
// false if p is shorter than PayloadLen or lacks the magic.
func ParsePayload(p []byte) (h Payload, ok bool) {
	if len(p) < PayloadLen || binary.BigEndian.Uint32(p) != Magic {
		return Payload{}, false
	}
	return Payload{
		Run:  binary.BigEndian.Uint32(p[4:]),
		Flow: binary.BigEndian.Uint32(p[8:]),
		Seq:  binary.BigEndian.Uint64(p[16:]),
	}, true
}

// Config describes the frames to build.
type Config struct {
	SrcMAC, DstMAC net.HardwareAddr // Ethernet source and destination
	Src, Dst       netip.Addr       // IPv4 source and destination
	// SrcPort is the first inner UDP source port; flow i uses SrcPort+i.
	SrcPort uint16
	DstPort uint16
	// Flows is the number of inner flows (default 64).
	Flows int
	// FirstFlow is the flow number written into flow 0's packets (flow i
	// carries FirstFlow+i), so that several generators feeding one sink
	// number their flows apart.
	FirstFlow uint32
	// Size is the IPv4 packet length in bytes, MinSize..MaxSize.
	Size int
}

// Generator builds and sends frames. It has one owner goroutine.
type Generator struct {
	cfg       Config
	templates [][]byte // one full Ethernet frame per flow
	seq       []uint64
}

// New checks cfg and builds one template frame per flow.
func New(cfg Config) (*Generator, error) {
	if cfg.Flows == 0 {
		cfg.Flows = 64
	}
	if cfg.Size < MinSize || cfg.Size > MaxSize {
		return nil, fmt.Errorf("gen: packet size %d bytes, want %d to %d", cfg.Size, MinSize, MaxSize)
	}
	if !cfg.Src.Is4() || !cfg.Dst.Is4() {
		return nil, fmt.Errorf("gen: addresses %v -> %v, want IPv4", cfg.Src, cfg.Dst)
	}
	if len(cfg.SrcMAC) != 6 || len(cfg.DstMAC) != 6 {
		return nil, fmt.Errorf("gen: MAC addresses %v -> %v, want 6 bytes each", cfg.SrcMAC, cfg.DstMAC)
	}
	if int(cfg.SrcPort)+cfg.Flows > 65536 || cfg.Flows < 1 {
		return nil, fmt.Errorf("gen: %d flows from source port %d do not fit", cfg.Flows, cfg.SrcPort)
	}
	g := &Generator{cfg: cfg, seq: make([]uint64, cfg.Flows)}
	for i := range cfg.Flows {
		g.templates = append(g.templates, buildFrame(cfg, i))
	}
	return g, nil
}

// FrameLen is the Ethernet frame length in bytes.
func (g *Generator) FrameLen() int { return ethLen + g.cfg.Size }

// Flows is the number of inner flows.
func (g *Generator) Flows() int { return g.cfg.Flows }

func buildFrame(cfg Config, flow int) []byte {
	b := make([]byte, ethLen+cfg.Size)
	copy(b[0:6], cfg.DstMAC)
	copy(b[6:12], cfg.SrcMAC)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[ethLen:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(cfg.Size))
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
	ip[8] = 64
	ip[9] = 17
	s, d := cfg.Src.As4(), cfg.Dst.As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip[:ipv4Len]))
	udp := ip[ipv4Len:]
	binary.BigEndian.PutUint16(udp[0:], cfg.SrcPort+uint16(flow))
	binary.BigEndian.PutUint16(udp[2:], cfg.DstPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(cfg.Size-ipv4Len))
	// udp[6:8] = 0: no checksum (RFC 768).
	p := udp[udpLen:]
	binary.BigEndian.PutUint32(p, Magic)
	binary.BigEndian.PutUint32(p[8:], cfg.FirstFlow+uint32(flow))
	for i := PayloadLen; i < len(p); i++ {
		p[i] = byte(i)
	}
	return b
}

// ipChecksum is the Internet checksum (RFC 1071) of an IPv4 header whose
// checksum field is zero.
func ipChecksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// Report is what one Run did.
type Report struct {
	Run     uint32
	Offered float64       // asked rate, packets/s
	Sent    uint64        // frames the TX half took
	PerFlow []uint64      // frames sent per flow (index = flow)
	Elapsed time.Duration // from the first frame to the end of the run
	// Short counts times the TX ring or the pool could not take a whole
	// burst (the generator fell behind).
	Short uint64
}

// Achieved is the rate the generator reached, packets/s.
func (r Report) Achieved() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Sent) / r.Elapsed.Seconds()
}

// Run sends frames tagged run at rate packets/s for d (or until ctx ends),
// round robin over the flows, and returns what it sent. Sequence numbers
// restart at 0 for every run. It locks its OS thread while running.
func (g *Generator) Run(ctx context.Context, tx dataplane.TX, run uint32, rate float64, d time.Duration) Report {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for i := range g.seq {
		g.seq[i] = 0
	}
	rep := Report{Run: run, Offered: rate, PerFlow: make([]uint64, g.cfg.Flows)}
	frames := make([]dataplane.Frame, burst)
	flow := 0
	start := time.Now()
	end := start.Add(d)
	done := ctx.Done()
	for {
		now := time.Now()
		if !now.Before(end) {
			break
		}
		select {
		case <-done:
			end = now
		default:
		}
		due := uint64(rate * now.Sub(start).Seconds())
		if due <= rep.Sent {
			tx.Reclaim()
			time.Sleep(tick)
			continue
		}
		want := min(int(due-rep.Sent), burst)
		n := tx.Alloc(frames[:want])
		if n < want {
			rep.Short++
		}
		f0 := flow
		for i := range n {
			f := &frames[i]
			f.SetLen(len(g.templates[flow]))
			b := f.Data()
			copy(b, g.templates[flow])
			p := b[ethLen+ipv4Len+udpLen:]
			binary.BigEndian.PutUint32(p[4:], run)
			binary.BigEndian.PutUint64(p[16:], g.seq[flow])
			g.seq[flow]++
			flow++
			if flow == len(g.templates) {
				flow = 0
			}
		}
		m := tx.Transmit(frames[:n])
		if m < n {
			rep.Short++
			// Take back the sequence numbers of the frames not sent, so
			// that the sink sees no gap the gateways did not cause.
			for i := n - 1; i >= m; i-- {
				flow--
				if flow < 0 {
					flow = len(g.templates) - 1
				}
				g.seq[flow]--
			}
			tx.Free(frames[m:n])
		}
		for i := range m {
			rep.PerFlow[(f0+i)%len(g.templates)]++
		}
		rep.Sent += uint64(m)
		if m == 0 {
			time.Sleep(tick)
		}
	}
	rep.Elapsed = time.Since(start)
	for range 100 {
		if tx.Reclaim() == 0 {
			break
		}
	}
	return rep
}
