package dataplanetest

import (
	"runtime"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
)

// Moving the suite's frames: build and send flows, collect and check what
// arrives, give every frame back.

// flowOf returns the flow of the j-th frame sent from TX queue qi: every TX
// queue has flows of its own, so a flow's frames stay in order.
func (p *pair) flowOf(qi, j int) uint16 {
	per := p.s.opts.Flows / p.queues
	return uint16(qi*per + j%per)
}

// send builds count frames of the given sizes (cycled) on TX queue qi of the
// direction's source and transmits them all, retrying while the ring is
// full, for up to the timeout. It returns how many were taken.
func (p *pair) send(dir uint8, qi, count int, sizes []int) int {
	p.t.Helper()
	src, _, se, de := p.ends(dir)
	tx := src.Queue(qi).TX()
	buf := make([]dataplane.Frame, 64)
	sent := 0
	deadline := time.Now().Add(p.s.opts.Timeout)
	for sent < count {
		n := tx.Alloc(buf[:min(len(buf), count-sent)])
		if n == 0 {
			tx.Reclaim()
			if time.Now().After(deadline) {
				p.t.Fatalf("%s q%d: Alloc returned 0 frames for %v", src.Name(), qi, p.s.opts.Timeout)
			}
			runtime.Gosched()
			continue
		}
		for i := range n {
			f := p.flowOf(qi, sent+i)
			tg := tag{dir: dir, flow: f, seq: p.seq[dir][f]}
			p.seq[dir][f]++
			if !build(&buf[i], sizes[(sent+i)%len(sizes)], se, de, tg) {
				p.t.Fatalf("%s q%d: frame of %d bytes does not fit (Len %d, Tailroom %d)", src.Name(), qi, sizes[(sent+i)%len(sizes)], buf[i].Len(), buf[i].Tailroom())
			}
		}
		sent += p.transmitAll(src, tx, buf[:n], deadline)
		if time.Now().After(deadline) {
			p.t.Fatalf("%s q%d: sent %d of %d frames in %v", src.Name(), qi, sent, count, p.s.opts.Timeout)
		}
	}
	return sent
}

// transmitAll transmits frames until all are taken or deadline passes; it
// frees what is left then and returns how many were taken.
func (p *pair) transmitAll(port dataplane.Port, tx dataplane.TX, frames []dataplane.Frame, deadline time.Time) int {
	taken := 0
	for taken < len(frames) {
		taken += tx.Transmit(frames[taken:])
		if taken < len(frames) {
			tx.Reclaim()
			if time.Now().After(deadline) {
				p.t.Errorf("%s: Transmit took %d of %d frames before the timeout", port.Name(), taken, len(frames))
				tx.Free(frames[taken:])
				break
			}
			runtime.Gosched()
		}
	}
	return taken
}

// received is a frame the suite received and still owns.
type received struct {
	f     dataplane.Frame
	queue int
	tag   tag
}

// collect receives on every queue of the direction's destination until want
// frames have come or the timeout passes (then, unless lossy is allowed, it
// fails), checking each frame; it keeps the frames when keep is set, and
// frees them otherwise. It then polls briefly for frames beyond want, which
// are an error.
func (p *pair) collect(dir uint8, want int, keep bool) []received {
	p.t.Helper()
	_, dst, _, de := p.ends(dir)
	buf := make([]dataplane.Frame, 64)
	var out []received
	last := make(map[uint16]uint64)
	got := 0
	deadline := time.Now().Add(p.s.opts.Timeout)
	extra := time.Time{}
	for {
		progress := false
		for qi := range dst.NumQueues() {
			rx := dst.Queue(qi).RX()
			n := rx.Receive(buf)
			for i := range n {
				f := &buf[i]
				tg, ok := p.checkFrame(dst, f, de)
				if ok && tg.dir == dir && p.late != nil && int(tg.flow) < len(p.late) && tg.seq < p.late[tg.flow] {
					rx.Free(buf[i : i+1])
					continue
				}
				if ok {
					if tg.dir != dir {
						p.t.Errorf("%s q%d: frame of direction %d, want %d", dst.Name(), qi, tg.dir, dir)
					}
					if l, seen := last[tg.flow]; seen && tg.seq <= l {
						p.t.Errorf("%s q%d: flow %d seq %d after seq %d, want increasing", dst.Name(), qi, tg.flow, tg.seq, l)
					}
					last[tg.flow] = tg.seq
				}
				got++
				if keep && ok && got <= want {
					out = append(out, received{f: *f, queue: qi, tag: tg})
				} else {
					rx.Free(buf[i : i+1])
				}
			}
			progress = progress || n > 0
		}
		if got >= want && extra.IsZero() {
			extra = time.Now().Add(20 * time.Millisecond)
		}
		if !extra.IsZero() && time.Now().After(extra) {
			break
		}
		if got < want && time.Now().After(deadline) {
			// Fatal: the rest of the subtest would wait for frames too.
			p.t.Fatalf("%s: received %d frames in %v, want %d (even a lossy port must not lose frames in a quiet exchange)", dst.Name(), got, p.s.opts.Timeout, want)
		}
		if !progress {
			p.reclaimAll()
			runtime.Gosched()
		}
	}
	if got > want {
		p.t.Errorf("%s: received %d frames, want %d (duplicates or strays)", dst.Name(), got, want)
	}
	return out
}

// checkFrame checks a received frame's shape and contents.
func (p *pair) checkFrame(port dataplane.Port, f *dataplane.Frame, de endpoint) (tag, bool) {
	p.t.Helper()
	maxLen := port.MTU() + ethLen + 4
	if f.Len() < ethLen || f.Len() > maxLen {
		p.t.Errorf("%s: received a frame of %d bytes, want [%d, %d]", port.Name(), f.Len(), ethLen, maxLen)
		return tag{}, false
	}
	if f.Headroom() < dataplane.MinHeadroom {
		p.t.Errorf("%s: received frame Headroom() = %d, want >= %d", port.Name(), f.Headroom(), dataplane.MinHeadroom)
	}
	if room := f.Len() + f.Tailroom(); room < port.MTU()+ethLen+dataplane.MinTailroom {
		p.t.Errorf("%s: received frame Len()+Tailroom() = %d, want >= MTU+14+%d = %d", port.Name(), room, dataplane.MinTailroom, port.MTU()+ethLen+dataplane.MinTailroom)
	}
	if len(f.Data()) != f.Len() {
		p.t.Errorf("%s: len(Data()) = %d, Len() = %d", port.Name(), len(f.Data()), f.Len())
	}
	tg, ok := parse(f.Data(), de)
	if !ok {
		p.t.Errorf("%s: received a frame that is not the suite's or was corrupted: % x", port.Name(), f.Data()[:min(f.Len(), 64)])
	}
	return tg, ok
}

// reclaimAll lets completed transmissions flow back on both ports.
func (p *pair) reclaimAll() {
	for _, port := range []dataplane.Port{p.a, p.b} {
		for qi := range port.NumQueues() {
			port.Queue(qi).TX().Reclaim()
		}
	}
}

func anyLeft(byQueue [][]dataplane.Frame) bool {
	for _, fs := range byQueue {
		if len(fs) > 0 {
			return true
		}
	}
	return false
}

// poolOf returns the pool a TX half allocates from.
func poolOf(t *testing.T, tx dataplane.TX) *dataplane.Pool {
	var f [1]dataplane.Frame
	if tx.Alloc(f[:]) != 1 {
		t.Fatalf("Alloc of one frame failed on a fresh port")
	}
	defer tx.Free(f[:])
	return f[0].Pool()
}

// drain receives and frees on every queue of port until want frames came
// (and then no more for a short while) or, with want 0, until the port has
// been quiet for 100 ms. It returns how many frames came.
func (p *pair) drain(port dataplane.Port, want int) int {
	p.t.Helper()
	buf := make([]dataplane.Frame, 64)
	got := 0
	deadline := time.Now().Add(p.s.opts.Timeout)
	quietSince := time.Now()
	for time.Now().Before(deadline) {
		for qi := range port.NumQueues() {
			rx := port.Queue(qi).RX()
			if n := rx.Receive(buf); n > 0 {
				got += n
				rx.Free(buf[:n])
				quietSince = time.Now()
			}
		}
		p.reclaimAll()
		if (want == 0 || got >= want) && time.Since(quietSince) > 100*time.Millisecond {
			break
		}
		runtime.Gosched()
	}
	if want > 0 && got != want {
		p.t.Errorf("%s: drained %d frames, want %d", port.Name(), got, want)
	}
	return got
}
