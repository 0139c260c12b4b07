package fastpath

import "unsafe"

// Inbound's second pass (ARCHITECTURE.md, "Inbound"): the replay window
// after authentication (whitepaper §5.4.6, RFC 6479), once per keypair
// per burst.

// replayCheck runs the replay window over the authenticated counters of
// w.meta[:n], once per distinct keypair in the batch (the common case is one
// keypair per batch: one lock), and fills w.accepted.
func (w *worker) replayCheck(n int) {
	meta := w.meta[:n]
	// The usual burst: every packet authenticated, all of one session.
	if kp := meta[0].kp; kp != nil {
		same := true
		for i := range meta[1:] {
			same = same && meta[1+i].kp == kp
		}
		if same {
			if _, widened := kp.checkReplay(w.rxQueue, w.e.cfg.ReplayWindow, w.counters[:n], w.accepted[:n]); widened {
				w.c.replayWidened.Add(1)
			}
			return
		}
	}
	// Many sessions, a frame or a few each (a concentrator's burst): a
	// check per run.
	runs := 0
	for i := range meta {
		if i == 0 || meta[i].kp != meta[i-1].kp {
			runs++
		}
	}
	if 2*runs > n {
		w.replayRuns(meta)
		return
	}
	// A few sessions, interleaved: each keypair's frames are linked in frame order
	// (sameNext), the keypairs found through a small open-addressed table
	// (replayTab, at least twice the burst), and each keypair's counters
	// checked in one call, in the order of its first frame: linear in the
	// burst (comparing every frame with every later one took some 4,000
	// steps for a burst from 64 sessions).
	tab, next, heads := w.replayTab, w.sameNext[:n], w.replayHeads[:0]
	mask := len(tab) - 1
	for i := range meta {
		w.accepted[i] = false
		kp := meta[i].kp
		if kp == nil {
			continue
		}
		next[i] = -1
		h := int(uint64(uintptr(unsafe.Pointer(kp)))*0x9e3779b97f4a7c15>>w.replayShift) & mask
		for tab[h].kp != nil && tab[h].kp != kp {
			h = (h + 1) & mask
		}
		if g := &tab[h]; g.kp == nil {
			*g = replayGroup{kp: kp, first: int32(i), last: int32(i)}
			heads = append(heads, int32(h))
		} else {
			next[g.last], g.last = int32(i), int32(i)
		}
	}
	for _, h := range heads {
		g := &tab[h]
		m := 0
		for j := g.first; j >= 0; j = next[j] {
			w.scratchC[m] = w.counters[j]
			m++
		}
		if _, widened := g.kp.checkReplay(w.rxQueue, w.e.cfg.ReplayWindow, w.scratchC[:m], w.scratchA[:m]); widened {
			w.c.replayWidened.Add(1)
		}
		m = 0
		for j := g.first; j >= 0; j = next[j] {
			w.accepted[j] = w.scratchA[m]
			m++
		}
		*g = replayGroup{} // the table is empty between bursts
	}
}

// replayRuns is replayCheck for a burst of many short runs of one
// keypair's frames (meta[i] of the burst's frame i): each run is checked
// in one call, in frame order, a lone frame with the window's check of
// one counter (replay.SharedWindow.CheckFrom). The verdicts are those of
// one call per keypair with all its frames (a window checks a batch as it
// would the same counters in consecutive calls), with a lock per run
// instead of one per keypair, and without the table: for a burst from 64
// sessions, the table's bookkeeping and a batch call per session cost
// more than the locks they save.
func (w *worker) replayRuns(meta []rxMeta) {
	policy := w.e.cfg.ReplayWindow
	counters, accepted := w.counters[:len(meta)], w.accepted[:len(meta)]
	for i := 0; i < len(meta); {
		kp := meta[i].kp
		j := i + 1
		for j < len(meta) && meta[j].kp == kp {
			j++
		}
		var widened bool
		switch {
		case kp == nil: // not authentic
			clear(accepted[i:j])
		case j == i+1:
			accepted[i], widened = kp.checkReplayOne(w.rxQueue, policy, counters[i])
		default:
			_, widened = kp.checkReplay(w.rxQueue, policy, counters[i:j], accepted[i:j])
		}
		if widened {
			w.c.replayWidened.Add(1)
		}
		i = j
	}
}

// replayGroup is a keypair's entry in replayCheck's table: its first and
// last frame of the burst (linked through w.sameNext).
type replayGroup struct {
	kp          *Keypair
	first, last int32
}
