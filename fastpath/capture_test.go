package fastpath

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// drain reads every frame a capture holds now.
func drain(t testing.TB, c *Capture) []CapturedFrame {
	t.Helper()
	var out []CapturedFrame
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		var fr CapturedFrame
		err := c.ReadFrame(ctx, &fr)
		cancel()
		if err != nil {
			return out
		}
		out = append(out, fr)
	}
}

func TestCaptureFilter(t *testing.T) {
	const n = 8
	for _, tc := range []struct {
		name   string
		filter CaptureFilter
		// want: frames per (port, dir) at gateway A for one batch of n
		// frames from hostA to hostB.
		lanRX, wanTX int
	}{
		{"all", CaptureFilter{}, n, n},
		{"lan", CaptureFilter{Port: CaptureLAN}, n, 0},
		{"wan", CaptureFilter{Port: CaptureWAN}, 0, n},
		{"rx", CaptureFilter{Dir: CaptureRX}, n, 0},
		{"wan-tx", CaptureFilter{Port: CaptureWAN, Dir: CaptureTX}, 0, n},
		{"wan-rx", CaptureFilter{Port: CaptureWAN, Dir: CaptureRX}, 0, 0},
		// Inner addresses are seen on the LAN, outer ones on the WAN.
		{"host-inner", CaptureFilter{Host: hostAddrB}, n, 0},
		{"host-outer", CaptureFilter{Host: wanAddrB}, 0, n},
		{"host-other", CaptureFilter{Host: netip.MustParseAddr("198.18.9.9")}, 0, 0},
		{"port-inner", CaptureFilter{L4Port: 2000}, n, 0},
		{"port-outer", CaptureFilter{L4Port: portB}, 0, n},
		{"udp", CaptureFilter{Proto: header.ProtoUDP}, n, n},
		{"icmp", CaptureFilter{Proto: 1}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigConfig{})
			c, err := NewCapture(CaptureConfig{Filter: tc.filter})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.a.SetCapture(c); err != nil {
				t.Fatal(err)
			}
			tmpl := templateFrame(t, r, 100)
			if got := pump(t, r, make([]dataplane.Frame, 64), tmpl, n); got != n {
				t.Fatalf("pump delivered %d, want %d", got, n)
			}
			var lanRX, wanTX int
			for _, fr := range drain(t, c) {
				switch {
				case fr.Port == CaptureLAN && fr.Dir == CaptureRX:
					lanRX++
					if !bytes.Equal(fr.Data, tmpl) || fr.OrigLen != len(tmpl) {
						t.Errorf("LAN RX frame = %x (orig %d), want the frame hostA sent %x", fr.Data, fr.OrigLen, tmpl)
					}
				case fr.Port == CaptureWAN && fr.Dir == CaptureTX:
					wanTX++
					var p header.Packet
					if header.Parse(fr.Data, &p) != header.OK || p.Dst != wanAddrB || p.DstPort != portB {
						t.Errorf("WAN TX frame is not UDP to %v:%d: %x", wanAddrB, portB, fr.Data)
					}
				default:
					t.Errorf("captured a frame on %v %v, want only LAN RX and WAN TX", fr.Port, fr.Dir)
				}
				if fr.Time.IsZero() || time.Since(fr.Time) > time.Minute {
					t.Errorf("frame time = %v, want about now", fr.Time)
				}
			}
			if lanRX != tc.lanRX || wanTX != tc.wanTX {
				t.Errorf("captured LAN RX %d, WAN TX %d; want %d, %d", lanRX, wanTX, tc.lanRX, tc.wanTX)
			}
			if s := c.Stats(); s.Captured != uint64(tc.lanRX+tc.wanTX) || s.Dropped != 0 {
				t.Errorf("Stats() = %+v, want %d captured, 0 dropped", s, tc.lanRX+tc.wanTX)
			}
		})
	}
}

func TestCaptureInboundAndDetach(t *testing.T) {
	r := newRig(t, rigConfig{})
	c, err := NewCapture(CaptureConfig{SnapLen: 60})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.b.SetCapture(c); err != nil {
		t.Fatal(err)
	}
	tmpl := templateFrame(t, r, 500)
	frames := make([]dataplane.Frame, 64)
	pump(t, r, frames, tmpl, 4)
	got := drain(t, c)
	var wanRX, lanTX int
	for _, fr := range got {
		if len(fr.Data) != 60 || fr.OrigLen <= 60 {
			t.Errorf("frame of %v %v: len(Data) = %d, OrigLen = %d; want 60 and more", fr.Port, fr.Dir, len(fr.Data), fr.OrigLen)
		}
		switch {
		case fr.Port == CaptureWAN && fr.Dir == CaptureRX:
			wanRX++
		case fr.Port == CaptureLAN && fr.Dir == CaptureTX:
			lanTX++
			if fr.OrigLen != len(tmpl) {
				t.Errorf("LAN TX OrigLen = %d, want %d (the inner frame hostA sent)", fr.OrigLen, len(tmpl))
			}
		}
	}
	if wanRX != 4 || lanTX != 4 {
		t.Errorf("gateway B captured WAN RX %d, LAN TX %d; want 4, 4", wanRX, lanTX)
	}
	if err := r.b.SetCapture(nil); err != nil {
		t.Fatal(err)
	}
	pump(t, r, frames, tmpl, 4)
	if got := drain(t, c); len(got) != 0 {
		t.Errorf("after SetCapture(nil), captured %d frames, want 0", len(got))
	}
	if err := r.a.SetCapture(c); err == nil {
		t.Errorf("SetCapture(a capture attached before) = nil, want an error")
	}
}

func TestCaptureRingFullDropsAndCounts(t *testing.T) {
	r := newRig(t, rigConfig{})
	c, err := NewCapture(CaptureConfig{Ring: 3, Filter: CaptureFilter{Port: CaptureLAN}}) // rounded up to 4
	if err != nil {
		t.Fatal(err)
	}
	if err := r.a.SetCapture(c); err != nil {
		t.Fatal(err)
	}
	tmpl := templateFrame(t, r, 64)
	if got := pump(t, r, make([]dataplane.Frame, 64), tmpl, 64); got != 64 {
		t.Fatalf("pump delivered %d of 64 with a full capture ring, want all 64", got)
	}
	if s := c.Stats(); s.Captured != 4 || s.Dropped != 60 {
		t.Errorf("Stats() = %+v, want 4 captured, 60 dropped", s)
	}
	if got := len(drain(t, c)); got != 4 {
		t.Errorf("read %d frames, want 4", got)
	}
}

func TestCaptureBadConfig(t *testing.T) {
	for _, cfg := range []CaptureConfig{{SnapLen: -1}, {SnapLen: MaxCaptureSnapLen + 1}, {Ring: -1}, {Ring: 1<<20 + 1}} {
		if _, err := NewCapture(cfg); err == nil {
			t.Errorf("NewCapture(%+v) = nil error, want one", cfg)
		}
	}
}

// TestZeroAllocsWithCapture: an attached capture, filtering on parsed
// headers and overflowing its ring, adds no allocation to a batch.
func TestZeroAllocsWithCapture(t *testing.T) {
	r := newRig(t, rigConfig{})
	c, err := NewCapture(CaptureConfig{Ring: 16, Filter: CaptureFilter{Proto: header.ProtoUDP}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.a.SetCapture(c); err != nil {
		t.Fatal(err)
	}
	frames := make([]dataplane.Frame, 64)
	tmpl := templateFrame(t, r, 64-42)
	if got := pump(t, r, frames, tmpl, 64); got != 64 {
		t.Fatalf("warm-up batch delivered %d of 64", got)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if got := pump(t, r, frames, tmpl, 64); got != 64 {
			t.Fatalf("batch delivered %d of 64", got)
		}
	})
	if allocs != 0 {
		t.Errorf("AllocsPerRun(batch of 64 with a capture attached) = %v, want 0", allocs)
	}
}

func BenchmarkCapturePut(b *testing.B) {
	r := newRig(b, rigConfig{})
	c, err := NewCapture(CaptureConfig{Ring: 4096})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.a.SetCapture(c); err != nil {
		b.Fatal(err)
	}
	tx := r.hostA.Queue(0).TX()
	frames := make([]dataplane.Frame, 64)
	tmpl := templateFrame(b, r, 512)
	n := tx.Alloc(frames)
	for i := 0; i < n; i++ {
		frames[i].SetLen(len(tmpl))
		copy(frames[i].Data(), tmpl)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(tmpl) * n))
	rg := &c.rings[0]
	for b.Loop() {
		c.put(0, CaptureLAN, CaptureRX, frames[:n])
		rg.tail.Store(rg.head.Load()) // the reader keeps up
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "pps")
}

// TestCaptureConcurrent runs the workers (their own goroutines) while a
// reader drains the capture, so that -race sees the ring's producer and
// consumer side by side; every frame is read once, in order per worker.
func TestCaptureConcurrent(t *testing.T) {
	r := newRig(t, rigConfig{start: true})
	c, err := NewCapture(CaptureConfig{Ring: 64, Filter: CaptureFilter{Port: CaptureLAN, Dir: CaptureRX}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.a.SetCapture(c); err != nil {
		t.Fatal(err)
	}
	const count = 1024 // a multiple of the burst, 32
	type result struct {
		seqs []uint32
		err  error
	}
	done := make(chan result)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		var res result
		var fr CapturedFrame
		for {
			if err := c.ReadFrame(ctx, &fr); err != nil {
				done <- res
				return
			}
			var p header.Packet
			if header.Parse(fr.Data, &p) != header.OK {
				res.err = fmt.Errorf("captured an unparsable frame %x", fr.Data)
				continue
			}
			res.seqs = append(res.seqs, binary.BigEndian.Uint32(fr.Data[p.PayloadOff:]))
		}
	}()
	for i := 0; i < count; i += 32 {
		var frames []dataplane.Frame
		for j := i; j < i+32; j++ {
			frames = append(frames, udpFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1000, 2000, seqPayload(uint32(j), 64)))
		}
		tx := r.hostA.Queue(0).TX()
		for deadline := time.Now().Add(5 * time.Second); len(frames) > 0; {
			n := tx.Transmit(frames)
			frames = frames[n:]
			if n == 0 {
				if time.Now().After(deadline) {
					t.Fatal("hostA's TX ring stayed full for 5 s")
				}
				time.Sleep(time.Millisecond)
			}
		}
		recvAll(t, r.hostB, 32, time.Millisecond, nil) // keep gwB's LAN ring drained
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st := c.Stats()
		if st.Captured+st.Dropped >= count || time.Now().After(deadline) {
			break
		}
	}
	// Every frame is in a ring or counted dropped. Stop the reader, then
	// read what it had not reached (a loaded machine may have kept it
	// off a CPU): the rings hold no more than what was captured.
	cancel()
	res := <-done
	if res.err != nil {
		t.Error(res.err)
	}
	for fr := (CapturedFrame{}); c.TryReadFrame(&fr); {
		var p header.Packet
		if header.Parse(fr.Data, &p) != header.OK {
			t.Fatalf("captured an unparsable frame %x", fr.Data)
		}
		res.seqs = append(res.seqs, binary.BigEndian.Uint32(fr.Data[p.PayloadOff:]))
	}
	st := c.Stats()
	if uint64(len(res.seqs)) != st.Captured || st.Captured+st.Dropped != count {
		t.Errorf("read %d frames; Stats() = %+v; want read = captured and captured + dropped = %d", len(res.seqs), st, count)
	}
	for i := 1; i < len(res.seqs); i++ {
		if res.seqs[i] <= res.seqs[i-1] {
			t.Fatalf("frame %d has sequence %d after %d: out of order", i, res.seqs[i], res.seqs[i-1])
		}
	}
}

// TestCaptureReaderEndsAtDetach: a reader waiting in ReadFrame returns
// ErrCaptureDetached when the capture is detached (SetCapture(nil), or
// another capture attached) and when the engine closes; it waited for
// ever (with a context that never ends), as a net.Conn's Read after Close
// does not.
func TestCaptureReaderEndsAtDetach(t *testing.T) {
	r := newRig(t, rigConfig{})
	for _, how := range []string{"SetCapture(nil)", "another capture", "Engine.Close"} {
		c, err := NewCapture(CaptureConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.a.SetCapture(c); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			var fr CapturedFrame
			done <- c.ReadFrame(context.Background(), &fr)
		}()
		time.Sleep(20 * time.Millisecond) // the reader waiting
		switch how {
		case "SetCapture(nil)":
			r.a.SetCapture(nil)
		case "another capture":
			c2, _ := NewCapture(CaptureConfig{})
			r.a.SetCapture(c2)
			defer r.a.SetCapture(nil)
		case "Engine.Close":
			r.a.Close()
		}
		select {
		case err := <-done:
			if !errors.Is(err, ErrCaptureDetached) {
				t.Errorf("%s: ReadFrame = %v, want ErrCaptureDetached", how, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: ReadFrame still waits 5 s later", how)
		}
	}
}
