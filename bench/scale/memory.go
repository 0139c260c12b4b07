//go:build linux

package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/udpframes"
)

// The memory part (issue "Memory per peer and an adaptive replay window"):
//
//   - idle_peer_bytes: Go heap per configured peer without a session, after
//     GC: the gateway's peer, its handshake state, the fast path's Peer, the
//     allowed-IPs entries (one /32 and one /128 each), at -peers peers;
//   - session_peer_bytes: the same once every peer has one live session
//     (a real handshake with a simulated initiator, then a keepalive in
//     order): the keypair, its replay window, its receiver index;
//   - rss_per_peer_bytes: the process's resident set per peer, from the
//     empty gateway to every peer with a session, after the collector
//     returned what it could (debug.FreeOSMemory); the pages of the memport
//     frame pools first touched by the handshakes count too (a few MB,
//     which dominate a -quick run and are small per peer at 100,000);
//   - fastpath_100k_vs_1: the encrypt rate of 64-byte frames through a
//     gateway holding -peers sessions, traffic in bursts of 64 spread
//     round-robin over 10,000 of them, over the rate of a gateway with one
//     peer, in the same run, bursts taking turns (one burst in flight: the
//     rates include the hand-off to the gateway's worker and back, so they
//     are below the fast path's own; BenchmarkPeers in ./fastpath measures
//     that; the workers are shared, see pumpedEngine; the frames are
//     written from one template and 8 bytes each, package udpframes),
//     over rateTime of bursts, every burst counted, on one P (onOneP;
//     fastpath_1_peer_pps and fastpath_100k_pps are these rates); beside it
//     fastpath_100k_vs_1_steady, the same leaving out the pairs of
//     bursts a preemption interrupted (steadyRates;
//     fastpath_rate_interrupted is their share), fastpath_100k_vs_1_median,
//     the same from the median bursts, and fastpath_rate_lost, frames
//     that did not come out within a burst's 100 ms; with
//     WGPIO_SCALE_CPUPROFILE set, a CPU profile of that loop, the two
//     gateways' goroutines labelled gw=many and gw=one;
//   - the kernel's cost per peer beside it (kernelPerPeer, kernel.go).
func init() { register("memory", runMemory) }

// heapBytes is the live Go heap after two collections.
func heapBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// rssBytes is the process's resident set (VmRSS), once the collector has
// returned what it can to the system.
func rssBytes() uint64 {
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	return fieldBytes(b, "VmRSS:", 1024)
}

func perPeer(after, before uint64, n int) int64 {
	return (int64(after) - int64(before)) / int64(n)
}

func runMemory(e *env, out map[string]any) error {
	n := e.Peers
	var g *scaleGateway
	var err error
	// The gateways' goroutines carry a profiler label (gw = many, one),
	// so that a profile of the rate (startProfile) tells them apart.
	pprof.Do(context.Background(), pprof.Labels("gw", "many"), func(context.Context) {
		g, err = memoryPerPeer(e, n, out)
	})
	if err != nil {
		return err
	}
	defer g.Close()
	if err := fastpathRate(e, g, n, out); err != nil {
		return err
	}
	// The kernel's cost last: the namespace holding its routes and the BPF
	// maps are freed by the kernel's workers after they are closed, for
	// seconds at 100,000 peers, on a CPU the rate would share.
	if err := kernelPerPeer(e, n, out); err != nil {
		return fmt.Errorf("kernel cost per peer: %w", err)
	}
	return nil
}

// fastpathRate puts fastpath_100k_vs_1 and its companions in out: g, with
// n sessions, against a one-peer gateway built here.
func fastpathRate(e *env, g *scaleGateway, n int, out map[string]any) error {
	// The rate: a one-peer gateway beside, on the same kind of clock.
	var one *scaleGateway
	var err error
	pprof.Do(context.Background(), pprof.Labels("gw", "one"), func(context.Context) {
		one, err = newGateway(gatewayOptions{Engine: pumpedEngine})
	})
	if err != nil {
		return err
	}
	defer one.Close()
	if err := one.Dev.AddPeers(simConfigs(1)); err != nil {
		return err
	}
	if err := one.establish(1, 1, e.Logf); err != nil {
		return err
	}
	if err := waitSessions(one, 1, 10*time.Second); err != nil {
		return err
	}
	spread := min(n, 10000)
	// The timed loop runs for rateTime of bursts (both gateways'), where
	// a loop of 10,000 bursts each, under a second, gave a one-peer rate
	// anywhere from 2.0 to 2.8 Mpps from run to run. It is still not
	// enough on a shared machine: at load 1-3 on 2 CPUs, runs of one
	// build gave fastpath_100k_vs_1 from 0.64 to 0.74 (and the median
	// ratio from 0.63 to 0.86), each quarter of a run 0.63-0.82, the
	// closed loop timing a parked worker's wake-up in every burst (the
	// ratio of the median bursts moves with it); compare builds in
	// alternating runs.
	timed := rateTime
	if e.Quick {
		timed = rateTime / 10
	}
	pN, err := newPump(g, innerFrames(g, spread))
	if err != nil {
		return err
	}
	p1, err := newPump(one, innerFrames(one, 1))
	if err != nil {
		return err
	}
	// The pumps and the gateways' workers run on one P (onOneP), then
	// warm-up (route caches, first touch of the pools), then bursts taking
	// turns, so that both gateways see the same machine: a burst of load
	// from elsewhere slows both alike.
	defer onOneP()()
	for range 2000 {
		p1.burst()
		pN.burst()
	}
	p1.reset()
	pN.reset()
	stop, err := startProfile()
	if err != nil {
		return err
	}
	// Each quarter's own rates and ratio are logged: how far they differ
	// shows what load from elsewhere did to the figure.
	start := time.Now()
	for q := 1; q <= 4; q++ {
		a1, aN := *p1, *pN
		// At least one round a quarter: after a long preemption the
		// clock may be past the quarter's end already (a quarter of
		// no bursts read 0/0, NaN pps).
		for first := true; first || time.Since(start) < timed*time.Duration(q)/4; first = false {
			for range 64 {
				p1.burst()
				pN.burst()
			}
		}
		r1 := float64(p1.packets-a1.packets) / (p1.elapsed - a1.elapsed).Seconds()
		rN := float64(pN.packets-aN.packets) / (pN.elapsed - aN.elapsed).Seconds()
		e.Logf("memory: quarter %d: 1 peer %.0f pps, %d peers over %d %.0f pps: %.3f", q, r1, n, spread, rN, rN/r1)
	}
	stop()
	if p1.lost()+pN.lost() > 0 {
		e.Logf("memory: %d and %d packets did not come out in time (1 peer, %d peers); %d and %d of them came later",
			p1.lost(), pN.lost(), n, p1.late, pN.late)
	}
	out["fastpath_rate_lost"] = p1.lost() + pN.lost()
	// The rates over the pairs of bursts that ran uninterrupted: a burst
	// over interruptedBy times its gateway's median was preempted (the
	// pump or the worker lost its CPU to another process for a time
	// slice, some milliseconds against tens of microseconds), and on a
	// loaded machine such bursts, taken whole, held half the time and
	// set the plain rates anywhere from 0.55 to 0.70 from one quarter to
	// the next. A pair is dropped whole, so both rates are over the same
	// moments; on a quiet machine few are (0.5% at load 1-2). The figure
	// of issue 19 is the plain one: the filter also drops a burst that is
	// slow for a reason of the 100,000-peer configuration itself (a
	// worker's publish of thousands of peers' stamps, every 5 s of real
	// time under slowClock), so it is reported beside it, not instead.
	r1, rN, dropped := steadyRates(p1, pN)
	out["fastpath_100k_vs_1"] = pN.rate() / p1.rate()
	out["fastpath_1_peer_pps"] = p1.rate()
	out["fastpath_100k_pps"] = pN.rate()
	out["fastpath_100k_vs_1_steady"] = rN / r1
	out["fastpath_rate_interrupted"] = float64(dropped) / float64(len(p1.times))
	e.Logf("memory: %d of %d pairs of bursts interrupted; without them: 1 peer %.0f pps, %d peers %.0f pps",
		dropped, len(p1.times), r1, n, rN)
	// The same from the median burst of each, which load from elsewhere
	// on a shared machine (a preempted pump or worker) disturbs least.
	out["fastpath_100k_vs_1_median"] = float64(p1.median()) / float64(pN.median())
	out["fastpath_rate_bursts"] = len(p1.times)
	e.Logf("memory: median burst: 1 peer %v, %d peers %v", p1.median(), n, pN.median())
	return nil
}

// onOneP runs the process on one P (GOMAXPROCS 1) until the function it
// returns restores the old count. The rate is the fast path's on one
// core: the pump and the gateways' shared workers are goroutines that
// hand each burst to each other, and with a second P the scheduler now
// and then gives a readied worker to the other P (an idle P is woken
// and steals it), so a burst ran on the pump's core or the other one,
// each frame crossing between their caches, a thread waking on a futex
// on the way. On this session's 2-CPU VM (2 December) that moved the
// one-peer rate between 2.0 and 3.6 M packets/s from run to run and
// each quarter's ratio between 0.55 and 0.69; on one P the one-peer
// rate was 4.3-4.5 M in every quarter of every run (ratios 0.59-0.67
// plain and 0.70-0.76 of the median bursts, against 0.58-0.62 and
// 0.69-0.86 on two Ps in the same hour). The gateways' other
// goroutines (timers, the control plane) share that P, so what the
// 100,000-peer configuration makes them do is in its rate.
func onOneP() (restore func()) {
	prev := runtime.GOMAXPROCS(1)
	return func() { runtime.GOMAXPROCS(prev) }
}

// rateTime is how long fastpathRate's timed loop runs (both gateways'
// bursts, taking turns).
const rateTime = 6 * time.Second

// startProfile starts a CPU profile of the rate's timed loop into the file
// named by WGPIO_SCALE_CPUPROFILE, if set, and returns what stops it.
func startProfile() (stop func(), err error) {
	name := os.Getenv("WGPIO_SCALE_CPUPROFILE")
	if name == "" {
		return func() {}, nil
	}
	f, err := os.Create(name)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// memoryPerPeer builds a gateway, configures n simulated peers and gives
// each a session, and puts idle_peer_bytes, session_peer_bytes and
// rss_per_peer_bytes in out. It returns the gateway, sessions live, for
// the caller to close.
func memoryPerPeer(e *env, n int, out map[string]any) (_ *scaleGateway, err error) {
	g, err := newGateway(gatewayOptions{Engine: pumpedEngine})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	e.Logf("memory: keys of %d simulated peers", n)
	cfgs := simConfigs(n)
	heap0, rss0 := heapBytes(), rssBytes()

	t := time.Now()
	if err := g.Dev.AddPeers(cfgs); err != nil {
		return nil, err
	}
	cfgs = nil
	e.Logf("memory: %d peers configured in %.1f s", n, time.Since(t).Seconds())
	heapIdle := heapBytes()
	out["idle_peer_bytes"] = perPeer(heapIdle, heap0, n)

	t = time.Now()
	if err := g.establish(n, 32, e.Logf); err != nil {
		return nil, err
	}
	if err := waitSessions(g, n, 30*time.Second); err != nil {
		return nil, err
	}
	e.Logf("memory: %d sessions in %.1f s", n, time.Since(t).Seconds())
	heapSess, rssSess := heapBytes(), rssBytes()
	out["session_peer_bytes"] = perPeer(heapSess, heap0, n)
	out["rss_per_peer_bytes"] = perPeer(rssSess, rss0, n)
	e.Logf("memory: heap %d → %d (idle) → %d (sessions) bytes; RSS %d → %d; index table %d slots",
		heap0, heapIdle, heapSess, rss0, rssSess, g.Engine.Indexes().Slots())
	return g, nil
}

// slowClock gives a gateway a protocol clock running at a hundredth of real
// time. Handshakes with 100,000 simulated peers take minutes on a loaded
// machine, longer than a session lives (Reject-After-Time, 180 s; keys
// erased after three times that): on the slowed clock the first sessions
// are still live when the last is made, as they would be on a machine
// fast enough. Nothing measured here depends on the clock's pace.
func slowClock(c *fastpath.Config) {
	start := time.Now()
	c.Now = func() int64 { return int64(time.Since(start)/100) + int64(time.Hour) }
}

// pumpedEngine is the engine configuration of the gateways the rate is
// measured on: slowClock, and shared workers (fastpath.Config.Share). The
// pump is a busy goroutine of this process beside the gateways' workers;
// owned workers (one per P here) would spin on the Ps it waits for, and
// every wake-up of a parked one hands the pump's P to the worker's thread
// and puts the pump's to sleep, so the closed loop would time the
// operating system's thread wake-ups (a few per burst, long on a loaded
// machine) instead of the fast path. Shared, a worker is readied on the
// pump's P and runs there, as the pump does while the worker waits.
func pumpedEngine(c *fastpath.Config) {
	slowClock(c)
	c.Share = true
}

// waitSessions waits until n peers of g have a confirmed session (the
// keepalive that confirms each is processed by a worker after the
// handshake).
func waitSessions(g *scaleGateway, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		live := int(g.Dev.Stats().LiveSessions)
		if live >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d sessions confirmed after %v", live, n, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// innerFrames returns a 64-byte inner IPv4/UDP frame from the host to each
// of the first k simulated peers' tunnel addresses, as the LAN port of g
// receives it.
func innerFrames(g *scaleGateway, k int) [][]byte {
	out := make([][]byte, k)
	src := netip.MustParseAddr("198.19.255.1")
	for i := range out {
		b := make([]byte, 64)
		dst := peerPrefixes(i, 0)[0].Addr()
		header.PutEthernet(b, header.MAC(mac6(g.LAN.MAC())), header.MAC(mac6(g.Host.MAC())), header.EtherTypeIPv4)
		ip := header.IPv4Fields{Protocol: header.ProtoUDP, Src: src.As4(), Dst: dst.As4(), TTL: 64}
		const pl = 64 - header.EthernetLen - header.IPv4MinLen - header.UDPLen
		header.PutIPv4(b[header.EthernetLen:], &ip, header.UDPLen+pl)
		header.PutUDP(b[header.EthernetLen+header.IPv4MinLen:], 1000, 2000, pl)
		out[i] = b
	}
	return out
}

// pump sends bursts of 64 frames into a gateway's LAN, the templates taken
// round-robin (written by package udpframes: the pump's own reads are the
// same with one template and with 10,000), and waits for them to come out
// of its WAN (closed loop: one burst in flight), timing each. A burst that times out leaves its
// missing frames owed: the next burst first waits for them, untimed, so
// that it never times the previous burst's output as its own.
type pump struct {
	g       *scaleGateway
	gen     *udpframes.Frames // tmpls in turn
	frames  []dataplane.Frame
	packets uint64 // received since reset
	sent    uint64 // transmitted since reset
	elapsed time.Duration
	times   []time.Duration // of each burst since reset
	got     []int32         // packets received in each burst since reset
	owed    int             // frames of a timed-out burst not yet out
	late    uint64          // frames received after their burst timed out, since reset
}

func newPump(g *scaleGateway, tmpls [][]byte) (*pump, error) {
	gen, err := udpframes.New(tmpls)
	if err != nil {
		return nil, err
	}
	return &pump{g: g, gen: gen, frames: make([]dataplane.Frame, 64)}, nil
}

func (p *pump) reset() {
	p.packets, p.sent, p.elapsed, p.times, p.got, p.late = 0, 0, 0, p.times[:0], p.got[:0], 0
}

// lost is how many frames sent since reset did not come out within their
// burst's time (pumpTimeout): those that came out later (late) and those
// that never did.
func (p *pump) lost() uint64 {
	if p.packets >= p.sent {
		return 0
	}
	return p.sent - p.packets
}

// pumpTimeout is how long a burst waits for its frames; a frame still
// missing after it is owed, and the next burst waits up to pumpTimeout
// more for it before it starts.
const pumpTimeout = 100 * time.Millisecond

// drain waits, untimed, for the frames a timed-out burst left owed, at
// most pumpTimeout; those that do not come are given up (lost).
func (p *pump) drain() {
	rx := p.g.Far.Queue(0).RX()
	t0 := time.Now()
	for p.owed > 0 && time.Since(t0) < pumpTimeout {
		k := rx.Receive(p.frames)
		rx.Free(p.frames[:k])
		p.owed -= k
		p.late += uint64(k)
		if k == 0 {
			runtime.Gosched()
		}
	}
	p.owed = 0
}

// median is the median time of a burst since reset: what load from
// elsewhere on a shared machine (a preempted pump or worker) disturbs
// least.
func (p *pump) median() time.Duration {
	if len(p.times) == 0 {
		return 0
	}
	s := slices.Clone(p.times)
	slices.Sort(s)
	return s[len(s)/2]
}

func (p *pump) rate() float64 { return float64(p.packets) / p.elapsed.Seconds() }

// interruptedBy: a burst that took more than this many times its pump's
// median burst was interrupted (steadyRates).
const interruptedBy = 4

// steadyRates returns the rates (packets per second) of a and b, two
// pumps whose bursts took turns since their reset, over the pairs of
// bursts (a's i-th and b's i-th) of which neither took more than
// interruptedBy times its pump's median, and how many pairs it dropped.
func steadyRates(a, b *pump) (ra, rb float64, dropped int) {
	ma, mb := a.median()*interruptedBy, b.median()*interruptedBy
	var ta, tb time.Duration
	var na, nb int
	for i := range min(len(a.times), len(b.times)) {
		if a.times[i] > ma || b.times[i] > mb {
			dropped++
			continue
		}
		ta, tb = ta+a.times[i], tb+b.times[i]
		na, nb = na+int(a.got[i]), nb+int(b.got[i])
	}
	return float64(na) / ta.Seconds(), float64(nb) / tb.Seconds(), dropped
}

// burst sends one burst and waits (up to 100 ms) for it on the far side.
func (p *pump) burst() {
	if p.owed > 0 {
		p.drain()
	}
	tx, rx := p.g.Host.Queue(0).TX(), p.g.Far.Queue(0).RX()
	t0 := time.Now()
	n := tx.Alloc(p.frames)
	for i := range p.frames[:n] {
		p.frames[i].SetLen(p.gen.Len())
		p.gen.Next(p.frames[i].Data())
	}
	sent := tx.Transmit(p.frames[:n])
	tx.Free(p.frames[sent:n])
	got := 0
	for got < sent {
		k := rx.Receive(p.frames[:sent-got])
		rx.Free(p.frames[:k])
		got += k
		if k == 0 {
			if time.Since(t0) > pumpTimeout {
				p.owed = sent - got
				break
			}
			runtime.Gosched()
		}
	}
	d := time.Since(t0)
	p.elapsed += d
	p.times = append(p.times, d)
	p.got = append(p.got, int32(got))
	p.packets += uint64(got)
	p.sent += uint64(sent)
}
