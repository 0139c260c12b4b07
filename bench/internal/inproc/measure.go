//go:build linux

package inproc

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// cleanLoss is the loss below which a step is clean (1%, the rig's and
// the seed report's definition).
const cleanLoss = 0.01

// factors are the offered rates of the paced steps, as multiples of the
// closed-loop step's delivered rate.
var factors = []float64{0.5, 0.8, 0.95, 1.1, 1.3, 1.6, 2.0}

// runner measures one configuration at one packet size.
type runner struct {
	name string // the configuration
	o    *Options
	st   *setup
	tr   *traffic
	sk   *sink
	stop chan struct{}
	done chan struct{}
}

func newRunner(name string, o *Options, st *setup, size int) (*runner, error) {
	tr, err := newTraffic(size)
	if err != nil {
		return nil, err
	}
	r := &runner{name: name, o: o, st: st, tr: tr, sk: newSink(tr), stop: make(chan struct{}), done: make(chan struct{})}
	labelledIn(name, labelSink, func() {
		go func() {
			defer close(r.done)
			st.sink(r.sk, r.stop)
		}()
	})
	return r, nil
}

func (r *runner) close() {
	close(r.stop)
	<-r.done
}

// window is the most packets the closed-loop generator keeps in flight,
// under any ring's room on the way, so that it never overruns a gateway,
// and large against the 64–128-packet batches of the stages, so that they
// run full (a small window makes a latency-bound ping-pong in which every
// stage idles between bursts); lossTimeout is how long it waits for the sink before it writes
// the packets in flight off as lost.
const (
	window      = 2048
	lossTimeout = 100 * time.Millisecond
)

// generate offers packets for d: at rate packets/s (paced by sleeping;
// what the first gateway does not take is lost, and counted as refused), or, with rate 0, in a
// closed loop: as fast as the sink counts them, with at most window
// packets in flight (a refused packet is offered again). It runs on its own goroutine with the generator label
// and returns the packets offered and how long it ran.
func (r *runner) generate(rate float64, d time.Duration) (offered, refused uint64, elapsed time.Duration) {
	done := make(chan struct{})
	labelledIn(r.name, labelGen, func() {
		go func() {
			defer close(done)
			base := r.sk.pub.delivered.Load()
			var lastGot, lost int64
			var lastMove time.Duration
			start := time.Now()
			for {
				el := time.Since(start)
				if el >= d {
					elapsed = el
					return
				}
				if rate == 0 {
					// Closed loop: at most window packets in flight
					// (offered, not yet counted by the sink); packets
					// lost on the way are written off when nothing
					// arrives for lossTimeout.
					got := int64(r.sk.pub.delivered.Load() - base)
					if got != lastGot {
						lastGot, lastMove = got, el
					}
					inflight := int64(offered) - got - lost
					if inflight < 0 { // written off, then arrived late
						lost += inflight
						inflight = 0
					}
					if inflight >= window {
						if el-lastMove > lossTimeout {
							lost += inflight
							lastMove = el
							continue
						}
						// Leave the CPU to the gateways rather than
						// spin.
						time.Sleep(20 * time.Microsecond)
						continue
					}
					k := r.st.push(r.tr, int(min(window-inflight, batchSize)))
					offered += uint64(k)
					if k == 0 {
						time.Sleep(20 * time.Microsecond)
					}
					continue
				}
				due := int64(rate*el.Seconds()) - int64(offered)
				if due <= 0 {
					// Sleep until about 32 packets are due.
					time.Sleep(min(max(time.Duration(32/rate*1e9), 20*time.Microsecond), time.Millisecond))
					continue
				}
				n := int(min(due, maxBurst))
				refused += uint64(n - r.st.push(r.tr, n))
				offered += uint64(n)
			}
		}()
	})
	<-done
	return offered, refused, elapsed
}

// drain waits until the sink has seen nothing new for 100 ms (at most 3
// s): on a busy machine a gateway may not run for tens of milliseconds.
func (r *runner) drain() {
	last := r.sk.counts()
	quiet := time.Duration(0)
	for t := time.Duration(0); t < 3*time.Second && quiet < 100*time.Millisecond; t += 5 * time.Millisecond {
		time.Sleep(5 * time.Millisecond)
		c := r.sk.counts()
		if c == last {
			quiet += 5 * time.Millisecond
		} else {
			quiet, last = 0, c
		}
	}
}

// tags numbers the steps of the whole process, so that a late packet of
// an earlier step, of any size, is recognised as such.
var tags atomic.Uint32

// profMu serialises CPU profiles (one per process at a time).
var profMu sync.Mutex

// step runs one offered-load step and measures it: CPU time of the
// process over the step and its drain, split between the sides by the
// step's CPU profile; allocations; what the sink counted.
func (r *runner) step(rate float64, d time.Duration) (Step, []byte, error) {
	w0 := time.Now()
	tag := tags.Add(1)
	r.tr.setTag(tag)
	r.sk.tag.Store(tag)
	var st Step
	c0 := r.sk.counts()
	d0 := r.st.drops()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	profMu.Lock()
	defer profMu.Unlock()
	var prof bytes.Buffer
	if err := pprof.StartCPUProfile(&prof); err != nil {
		return st, nil, fmt.Errorf("inproc: start CPU profile: %w", err)
	}
	cpu0, err := processCPU()
	if err != nil {
		pprof.StopCPUProfile()
		return st, nil, err
	}
	offered, refused, elapsed := r.generate(rate, d)
	r.drain()
	cpu1, err := processCPU()
	pprof.StopCPUProfile()
	if err != nil {
		return st, nil, err
	}
	runtime.ReadMemStats(&m1)
	c1 := r.sk.counts()
	d1 := r.st.drops()

	st.ClosedLoop = rate == 0
	st.Offered = float64(offered) / elapsed.Seconds()
	st.Sent = offered
	st.Delivered = c1.Delivered - c0.Delivered
	st.DeliveredPPS = float64(st.Delivered) / elapsed.Seconds()
	if offered > 0 {
		st.LossPct = 100 * (1 - float64(st.Delivered)/float64(offered))
	}
	st.Reordered = c1.Reordered - c0.Reordered
	st.Stale = c1.Stale - c0.Stale
	st.Foreign = c1.Foreign - c0.Foreign
	st.Corrupt = c1.Corrupt - c0.Corrupt
	st.Drops = map[string]uint64{}
	if refused > 0 {
		st.Drops["a_input_full"] = refused
	}
	for k, v := range d1 {
		if v > d0[k] {
			st.Drops[k] = v - d0[k]
		}
	}
	st.CPUSeconds = float64(cpu1-cpu0) / 1e9
	st.CPUShare = st.CPUSeconds / time.Since(w0).Seconds() / float64(runtime.GOMAXPROCS(0))
	st.Allocs = m1.Mallocs - m0.Mallocs
	byLabel, err := labelCPU(prof.Bytes(), configKey, labelKey)
	if err != nil {
		return st, nil, err
	}
	var sampled int64
	for _, v := range byLabel {
		sampled += v
	}
	st.ProfiledSeconds = float64(sampled) / 1e9
	if st.Delivered > 0 {
		n := float64(st.Delivered)
		st.CPUNsPerPkt = float64(cpu1-cpu0) / n
		st.AllocsPerPkt = float64(st.Allocs) / n
		if sampled > 0 {
			scale := float64(cpu1-cpu0) / float64(sampled) / n
			st.ANsPerPkt = float64(byLabel[r.name+"/"+labelA]) * scale
			st.BNsPerPkt = float64(byLabel[r.name+"/"+labelB]) * scale
			st.GenNsPerPkt = float64(byLabel[r.name+"/"+labelGen]) * scale
			st.SinkNsPerPkt = float64(byLabel[r.name+"/"+labelSink]) * scale
			st.OtherNsPerPkt = st.CPUNsPerPkt - st.ANsPerPkt - st.BNsPerPkt - st.GenNsPerPkt - st.SinkNsPerPkt
			st.GatewaysNsPerPkt = st.ANsPerPkt + st.BNsPerPkt + st.OtherNsPerPkt
		}
	}
	if st.Corrupt > 0 {
		bad := ""
		if p := r.sk.firstBad.Load(); p != nil {
			bad = *p
		}
		return st, nil, fmt.Errorf("inproc: the sink got %d corrupt packets (first: %s)", st.Corrupt, bad)
	}
	return st, prof.Bytes(), nil
}

// ready offers packets at a low rate until the sink counts some (the
// handshake is done), for at most timeout.
func (r *runner) ready(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		st, _, err := r.step(2000, 100*time.Millisecond)
		if err != nil {
			return err
		}
		if st.Delivered > 0 {
			return nil
		}
	}
	return errors.New("inproc: no packet crossed the tunnel (handshake did not complete?)")
}

// prepare waits until packets cross (the handshake is done) and warms the
// configuration up with a short closed-loop step that is not recorded.
func (r *runner) prepare() error {
	if err := r.ready(15 * time.Second); err != nil {
		return err
	}
	_, _, err := r.step(0, r.o.Duration/4)
	return err
}

// closedLoop runs one recorded closed-loop step.
func (r *runner) closedLoop() (Step, []byte, error) {
	st, prof, err := r.step(0, r.o.Duration)
	if err == nil && st.Delivered == 0 {
		err = errors.New("inproc: nothing delivered in a closed-loop step")
	}
	return st, prof, err
}

// paced completes a size's sweep after its closed-loop steps: paced steps
// at factors of the closed-loop steps' median delivered rate until two in
// a row lose 10% or more, then bisection between the highest clean and
// the lowest lossy offered rate.
func (r *runner) paced(closed []Step, closedProfs [][]byte, progress func(Step)) (SizeResult, [][]byte, error) {
	sr := SizeResult{Size: r.tr.size, Steps: slices.Clone(closed)}
	profs := slices.Clone(closedProfs)
	add := func(rate float64) (Step, error) {
		st, prof, err := r.step(rate, r.o.Duration)
		if err != nil {
			return st, err
		}
		sr.Steps = append(sr.Steps, st)
		profs = append(profs, prof)
		if progress != nil {
			progress(st)
		}
		return st, nil
	}
	top := medianClosed(sr.Steps)
	if top < 0 {
		return sr, nil, errors.New("inproc: no closed-loop step")
	}
	t := sr.Steps[top].DeliveredPPS
	lossy := 0
	for _, f := range factors {
		if r.o.ClosedOnly {
			break
		}
		st, err := add(f * t)
		if err != nil {
			return sr, nil, err
		}
		if st.LossPct >= 10 {
			lossy++
		} else {
			lossy = 0
		}
		if lossy >= 2 {
			break
		}
	}
	refine := r.o.Refine
	if r.o.ClosedOnly {
		refine = 0
	}
	for range refine {
		lo, hi := bracket(sr.Steps)
		if lo <= 0 || hi <= 0 || hi/lo < 1.03 {
			break
		}
		if _, err := add((lo + hi) / 2); err != nil {
			return sr, nil, err
		}
	}
	sr.summarize()
	return sr, profs, nil
}

// medianClosed returns the index of the closed-loop step with the median
// delivered rate (the lower median), or -1 if there is none.
func medianClosed(steps []Step) int {
	var idx []int
	for i, st := range steps {
		if st.ClosedLoop {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return -1
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(steps[a].DeliveredPPS, steps[b].DeliveredPPS) })
	return idx[(len(idx)-1)/2]
}

// bracket returns the highest clean and the lowest lossy offered rate of
// the paced steps (0 if none).
func bracket(steps []Step) (lo, hi float64) {
	for _, st := range steps {
		if !st.ClosedLoop && st.clean() {
			lo = max(lo, st.Offered)
		}
	}
	for _, st := range steps {
		if !st.ClosedLoop && !st.clean() && st.Offered > lo && (hi == 0 || st.Offered < hi) {
			hi = st.Offered
		}
	}
	return lo, hi
}

func (st *Step) clean() bool { return st.Delivered > 0 && st.LossPct < 100*cleanLoss }

// summarize fills the clean and closed-loop figures and takes the
// per-packet figures from the clean step (or, if none was clean, from the
// closed-loop step).
func (s *SizeResult) summarize() {
	s.CleanStep = -1
	if m := medianClosed(s.Steps); m >= 0 {
		s.ClosedLoopPPS, s.Closed = s.Steps[m].DeliveredPPS, s.Steps[m]
	}
	for i, st := range s.Steps {
		if st.ClosedLoop {
			continue
		}
		if st.clean() && (s.CleanStep < 0 || st.Offered > s.Steps[s.CleanStep].Offered) {
			s.CleanStep, s.CleanPPS = i, st.DeliveredPPS
		}
	}
	at := s.CleanStep
	if at < 0 {
		at = medianClosed(s.Steps)
	}
	if at >= 0 {
		s.At = s.Steps[at]
	}
}

// pairedVsStock returns, for each closed-loop round, the gateways' CPU per
// packet of steps over that of stock's step in the same round (closed[i]
// and stock taken one after the other), and whether stock was measured.
// On a machine whose load changes from second to second these paired
// ratios are steadier than the ratio of the medians.
func pairedVsStock(steps, stock []Step) []float64 {
	var out []float64
	for i := range min(len(steps), len(stock)) {
		if steps[i].GatewaysNsPerPkt > 0 && stock[i].GatewaysNsPerPkt > 0 {
			out = append(out, steps[i].GatewaysNsPerPkt/stock[i].GatewaysNsPerPkt)
		}
	}
	return out
}
