package fastpath

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// TestMixedBurstsModel holds inbound to a model of its verdicts over
// random bursts of up to 64 frames from 4 sessions: each frame of a
// session chosen at random (or, in some bursts, frames 0, n/2 and n-1 of
// one session and the rest of any, the shape inboundAhead's one-session
// check reads as one session), with a fresh counter, one skipped earlier
// (a hole the window accepts once), one seen before (in an earlier burst
// or earlier in this one), a corrupted tag, or cut short (anywhere from
// an Ethernet header alone to a message one byte short of its tag; the
// port drops a shorter runt before the worker sees it). The model
// checks counter by counter per session in frame order: a runt is a
// malformed drop, a bad tag an auth drop that leaves the window as it
// was, a counter accepted before a replay drop. Per burst the packets
// delivered (their inner source, in frame order), the drops by reason,
// Decrypted and each peer's RxBytes must be the model's, and no keypair
// may stay in the worker's per-frame state.
// It runs with the look-ahead (inboundAhead) on, as on a gateway with
// many sessions, and off, as with 4 sessions of a small one.
func TestMixedBurstsModel(t *testing.T) {
	for _, ahead := range []bool{true, false} {
		t.Run(fmt.Sprintf("ahead=%v", ahead), func(t *testing.T) { mixedBurstsModel(t, ahead) })
	}
}

func mixedBurstsModel(t *testing.T, ahead bool) {
	const sessions = 4
	mr := newManyInRig(t, sessions, sessions)
	if ahead {
		mr.r.b.inAheadMin = 0
	}
	w := mr.r.b.workers[0]
	tx, rx := mr.r.wanA.Queue(0).TX(), mr.r.hostB.Queue(0).RX()
	rng := rand.New(rand.NewPCG(19, 1))
	seen := make([]map[uint64]bool, sessions)
	var holes [sessions][]uint64
	for j := range seen {
		seen[j] = map[uint64]bool{}
	}
	msgLen := uint64(len(mr.tmpls[0]) - manyInMsgOff)
	frames := make([]dataplane.Frame, 64)
	out := make([]dataplane.Frame, 64)
	for round := range 400 {
		n := 1 + rng.IntN(64)
		if round%5 == 0 {
			n = 64
		}
		n = tx.Alloc(frames[:n])
		type plan struct {
			j   int
			c   uint64
			bad bool
			cut int // the frame's length if not -1
		}
		plans := make([]plan, n)
		lead := rng.IntN(sessions)
		for i := range plans {
			p := &plans[i]
			p.cut = -1
			p.j = rng.IntN(sessions)
			if round%3 == 0 && (i == 0 || i == n/2 || i == n-1) {
				p.j = lead
			}
			j := p.j
			switch k := rng.IntN(10); {
			case k < 5: // fresh
				p.c = mr.next[j]
				mr.next[j]++
			case k == 5: // skip some, leaving holes
				gap := uint64(1 + rng.IntN(5))
				for h := range gap {
					holes[j] = append(holes[j], mr.next[j]+h)
				}
				p.c = mr.next[j] + gap
				mr.next[j] += gap + 1
			case k == 6 && len(holes[j]) > 0: // a hole
				h := rng.IntN(len(holes[j]))
				p.c = holes[j][h]
			case k <= 7 && mr.next[j] > 0: // seen or sent before (a replay, if accepted)
				p.c = uint64(rng.IntN(int(mr.next[j])))
			case k == 8:
				p.c = mr.next[j]
				mr.next[j]++
				p.bad = true
			default:
				p.c = mr.next[j]
				mr.next[j]++
				p.cut = header.EthernetLen + rng.IntN(len(mr.tmpls[j])-header.EthernetLen)
			}
			mr.put(&frames[i], i, j, p.c)
		}
		mr.seal(n)
		// The model, in frame order.
		var wantSrc []netip.Addr
		var wantDrops [NumDropReasons]uint64
		var wantRx [sessions]uint64
		otherDrops := uint64(0)
		for i, p := range plans {
			d := frames[i].Data()
			switch {
			case p.cut >= 0:
				frames[i].SetLen(p.cut)
				otherDrops++
			case p.bad:
				d[len(d)-1-rng.IntN(16)] ^= 1 << rng.IntN(8)
				wantDrops[DropAuth]++
			case seen[p.j][p.c]:
				wantDrops[DropReplay]++
			default:
				seen[p.j][p.c] = true
				wantSrc = append(wantSrc, manyAddr(p.j))
				wantRx[p.j] += msgLen
			}
		}
		for j := range holes {
			holes[j] = slicesDeleteFunc(holes[j], func(c uint64) bool { return seen[j][c] })
		}
		before := TotalDrops(mr.r.b.Stats())
		dec := mr.r.b.Stats()[0].Decrypted
		var rxBefore [sessions]uint64
		for j, p := range mr.peers {
			rxBefore[j] = p.RxBytes.Load()
		}
		tx.Transmit(frames[:n])
		w.inbound(mr.r.clock.Now())
		m := rx.Receive(out)
		var gotSrc []netip.Addr
		for _, f := range out[:m] {
			d := f.Data()
			gotSrc = append(gotSrc, netip.AddrFrom4([4]byte(d[header.EthernetLen+12:header.EthernetLen+16])))
		}
		rx.Free(out[:m])
		if len(gotSrc) != len(wantSrc) {
			t.Fatalf("round %d (%+v): delivered %d, want %d; drops %v", round, plans, len(gotSrc), len(wantSrc),
				TotalDrops(mr.r.b.Stats()).List())
		}
		for i := range gotSrc {
			if gotSrc[i] != wantSrc[i] {
				t.Fatalf("round %d: delivered packet %d from %v, want %v", round, i, gotSrc[i], wantSrc[i])
			}
		}
		after := TotalDrops(mr.r.b.Stats())
		var other uint64
		for r := range after {
			d := after[r] - before[r]
			switch DropReason(r) {
			case DropAuth, DropReplay:
				if d != wantDrops[r] {
					t.Fatalf("round %d: drops %v +%d, want +%d (plans %+v)", round, DropReason(r), d, wantDrops[r], plans)
				}
			default:
				other += d
			}
		}
		if other != otherDrops {
			t.Fatalf("round %d: runt drops +%d, want +%d (plans %+v, delivered %d, drops %v)", round, other, otherDrops, plans, m, after.List())
		}
		if d := mr.r.b.Stats()[0].Decrypted - dec; d != uint64(len(wantSrc)) {
			t.Fatalf("round %d: Decrypted +%d, want +%d", round, d, len(wantSrc))
		}
		w.publish(mr.r.clock.Now())
		for j, p := range mr.peers {
			if d := p.RxBytes.Load() - rxBefore[j]; d != wantRx[j] {
				t.Fatalf("round %d: peer %d RxBytes +%d, want +%d", round, j, d, wantRx[j])
			}
		}
		for i := range w.meta {
			if w.meta[i].kp != nil {
				t.Fatalf("round %d: frame %d's keypair still held after the burst", round, i)
			}
		}
	}
}

// slicesDeleteFunc is slices.DeleteFunc without zeroing the tail (a
// uint64 slice).
func slicesDeleteFunc(s []uint64, del func(uint64) bool) []uint64 {
	k := 0
	for _, v := range s {
		if !del(v) {
			s[k] = v
			k++
		}
	}
	return s[:k]
}
