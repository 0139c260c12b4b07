package fastpath

import "time"

// minSpin is the least a worker's adaptive idle spin shrinks to (see
// spinner): about what blocking in the waiter and being woken costs the two
// threads involved (poll(2), an eventfd write, two context switches), so
// that a gap shorter than that is still spun through.
const minSpin = 5 * time.Microsecond

// spinner is a worker's adaptive idle spin: how long it keeps polling its
// queues after its last work before it blocks in its waiter. Spinning
// through a gap in the traffic costs the gap's length in CPU; blocking
// costs a sleep and a wake-up, about minSpin, whatever the gap. So a worker
// should spin through the short gaps and block at once in the long ones,
// and it learns which it sees:
//
//   - a spin that ran out (the worker blocked) halves the budget, down to
//     minSpin: traffic with gaps longer than the budget, such as a paced
//     sender's bursts, soon blocks after minSpin instead of spinning the
//     whole gap;
//   - work found after spinning g raises the budget to 2g (at most the
//     configured IdleSpin): the gaps seen are short and spinning pays.
//
// At saturation a worker never spins, so the budget changes nothing there.
// Owned by the worker; times in ns.
type spinner struct {
	budget, lo, hi int64
}

// newSpinner returns a spinner with budget idle (Config.IdleSpin, ns); a
// negative idle never spins.
func newSpinner(idle int64) spinner {
	if idle <= 0 {
		return spinner{}
	}
	return spinner{budget: idle, lo: min(idle, int64(minSpin)), hi: idle}
}

// hit records that work came after spinning for gap ns.
func (s *spinner) hit(gap int64) {
	if b := 2 * gap; b > s.budget {
		s.budget = min(b, s.hi)
	}
}

// miss records that a spin ran out and the worker blocked.
func (s *spinner) miss() { s.budget = max(s.budget/2, s.lo) }
