package dataplane

import "time"

// Spin defaults: the most and the least an adaptive Spinner spins.
const (
	// DefaultSpin is the longest spin: a gap in the traffic longer than
	// this is slept through whatever came before.
	DefaultSpin = 50 * time.Microsecond
	// MinSpin is about what blocking in a Waiter and being woken costs
	// the two threads involved (poll(2), an eventfd write, two context
	// switches): a gap shorter than that is cheaper spun through.
	MinSpin = 5 * time.Microsecond
)

// Spinner is an adaptive idle spin for a goroutine that polls RX halves:
// how long it keeps polling after it last found work before it blocks in
// its Waiter. Spinning through a gap in the traffic costs the gap's length
// in CPU; blocking costs a sleep and a wake-up, about MinSpin, whatever the
// gap. So the poller should spin through short gaps and block at once in
// long ones, and the Spinner learns which it sees:
//
//   - a spin that ran out (the poller blocked: Miss) halves the budget,
//     down to the floor: traffic whose gaps are longer than the budget,
//     such as a paced sender's bursts, soon blocks after the floor instead
//     of spinning each whole gap;
//   - work found after spinning for gap (Hit) raises the budget to 2 × gap,
//     up to the ceiling: the gaps seen are short and spinning pays.
//
// At saturation a poller never spins, so the budget changes nothing there.
// A Spinner belongs to one goroutine; times are in ns.
type Spinner struct {
	budget, lo, hi int64
}

// NewSpinner returns a spinner that spins at most max (its first budget)
// and at least min(floor, max); max <= 0 never spins.
func NewSpinner(max, floor time.Duration) Spinner {
	if max <= 0 {
		return Spinner{}
	}
	return Spinner{budget: int64(max), lo: int64(min(floor, max)), hi: int64(max)}
}

// Budget is how long to spin now, ns.
func (s *Spinner) Budget() int64 { return s.budget }

// Hit records that work came after spinning for gap ns.
func (s *Spinner) Hit(gap int64) {
	if b := 2 * gap; b > s.budget {
		s.budget = min(b, s.hi)
	}
}

// Miss records that a spin ran out and the poller blocked.
func (s *Spinner) Miss() { s.budget = max(s.budget/2, s.lo) }
