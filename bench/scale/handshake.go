//go:build linux

package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/protocol"
)

// The handshake part (issue 18): the control plane's handshake pool and
// timers, driven over memport by simulated peers (hs_sim.go).
//
//	handshake_responses_per_s   responses/s of a gateway with 1 handshake worker, pre-generated
//	                            initiations of distinct peers kept below the under-load mark,
//	                            the responses counted at the far end without being consumed
//	handshake_responses_2_per_s ... with 2 workers, in the same run
//	handshake_scaling_2_vs_1    the ratio
//	storm                       e.storm peers initiate at once and behave as real peers:
//	                            peers, seconds (until every one has a session), lost (without one
//	                            after 3 × REKEY_TIMEOUT), initiations, cookies, queue drops,
//	                            and the UAPI get (wg show) latency during it
//	timer_lateness_p99_ms       at e.Peers peers (every one with a timer armed), sessions with a
//	                            1 s persistent keepalive: how late each keepalive leaves
//	timer_lateness_max_ms, timer_lateness_samples
//	tick_cpu_share              Tick's busy time over wall time at e.Peers idle peers (one core = 1)
func init() { register("handshake", runHandshake) }

func runHandshake(e *env, out map[string]any) error {
	if hsWant("resp") {
		if err := measureResponses(e, out); err != nil {
			return err
		}
	}
	if hsWant("storm") {
		if err := measureStorm(e, out); err != nil {
			return err
		}
	}
	if hsWant("timers") {
		return measureTimers(e, out)
	}
	return nil
}

// hsResponseRun counts how many responses per second a gateway with the
// given number of handshake workers sends to frames, one initiation per
// peer, with at most window outstanding (below the under-load mark of
// HandshakeQueueLen/8, so that no cookie replies are involved).
func hsResponseRun(e *env, priv noise.PrivateKey, cfgs []gateway.PeerConfig, frames [][]byte, workers int) (float64, hsCPU, error) {
	g, err := newGateway(gatewayOptions{PrivateKey: priv, Peers: cfgs,
		Device: func(o *gateway.Options) { o.HandshakeWorkers = workers }})
	if err != nil {
		return 0, hsCPU{}, err
	}
	defer g.Close()
	g.Dev.Settle()
	f := newHSFar(g)
	const window = fastpath.HandshakeQueueLen/8 - 32
	n := len(frames)
	sent, got := 0, 0
	defer hsProfile(e, fmt.Sprintf("resp%d", workers))()
	tids := g.Engine.WorkerThreads()
	cpu0 := hsCPUNow(tids)
	start := time.Now()
	deadline := start.Add(2 * time.Minute)
	// The generator costs next to nothing: it refills the window in
	// batches of refill initiations (so the gateway's fast path takes them
	// in bursts, as a NIC delivers a busy link's), and between looks at
	// the far side it sleeps 1 ms (the window holds a hundred ms of work).
	const refill = 64
	for got < n {
		if sent < n && window-(sent-got) >= refill {
			for sent < n && sent-got < window && f.send(frames[sent]) {
				sent++
			}
		}
		k := 0
		for {
			r := f.receive(func(msg []byte) {
				if msg[0] == noise.TypeResponse {
					got++
				}
			})
			k += r
			if r < len(f.in) {
				break
			}
		}
		if k == 0 {
			if time.Now().After(deadline) {
				return 0, hsCPU{}, fmt.Errorf("%d of %d responses after %v (drops %v, device %v)", got, n, time.Since(start),
					fastpath.TotalDrops(g.Engine.Stats()).List(), g.Dev.Stats().Losses())
			}
			time.Sleep(time.Millisecond)
		}
	}
	wall := time.Since(start)
	c := hsCPUNow(tids).sub(cpu0)
	c.wall = wall
	// The worker threads' figures hold only if the workers owned the same
	// threads throughout (a shared worker runs on any, with others).
	c.owned = !slices.Contains(tids, 0) && slices.Equal(tids, g.Engine.WorkerThreads())
	return float64(n) / wall.Seconds(), c, nil
}

func measureResponses(e *env, out map[string]any) error {
	n := 4000
	if e.Quick {
		n = 300
	}
	priv, err := noise.NewPrivateKey()
	if err != nil {
		return err
	}
	t := time.Now()
	sims, err := newHSPeers(n, priv.PublicKey(), gwWANMAC, gwFarMAC)
	if err != nil {
		return err
	}
	frames := make([][]byte, n)
	errs := make([]error, n)
	hsParallel(n, func(i int) { frames[i], errs[i] = sims[i].initiation() })
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	e.Logf("handshake: %d peers and their initiations made in %.1f s", n, time.Since(t).Seconds())
	cfgs := hsConfigs(sims)
	var rate [3]float64
	cpu := map[string]any{}
	for _, w := range []int{1, 2} {
		r, c, err := hsResponseRun(e, priv, cfgs, frames, w)
		if err != nil {
			return fmt.Errorf("%d workers: %w", w, err)
		}
		rate[w] = r
		per := func(d time.Duration) float64 { return hsRound1(float64(d) / 1e3 / float64(n)) }
		cores := hsRound2(float64(c.process) / float64(c.wall))
		fig := map[string]any{
			"process_us_per_response": per(c.process),
			"process_cores":           cores,
			"engine_worker_owned":     c.owned,
		}
		engine := "the engine's worker shared the Go scheduler"
		if c.owned {
			fig["engine_us_per_response"] = per(c.threads)
			fig["engine_switches_per_response"] = hsRound2(float64(c.switches) / float64(n))
			engine = fmt.Sprintf("of it the engine's worker thread %.0f µs (%.2f context switches)", per(c.threads), float64(c.switches)/float64(n))
		}
		cpu[fmt.Sprintf("workers_%d", w)] = fig
		e.Logf("handshake: %d worker(s): %.0f responses/s; process CPU %.2f cores, %.0f µs per response, %s",
			w, r, cores, per(c.process), engine)
	}
	// Where the CPU goes (the process's, and of it the fast path's worker
	// thread's), to read the scaling with.
	out["handshake_cpu"] = cpu
	out["handshake_responses_per_s"] = hsRound1(rate[1])
	out["handshake_responses_2_per_s"] = hsRound1(rate[2])
	out["handshake_scaling_2_vs_1"] = hsRound2(rate[2] / rate[1])
	return nil
}

// hsStormAttempts is how many initiations each storm peer has ready: the
// first and its retries at about 5, 10, 15, 20 and 25 s, enough for the
// run's 2 × 3 × REKEY_TIMEOUT (a peer is lost if it has no session after
// the third).
const hsStormAttempts = 6

// hsStormSendBurst is how many frames the storm's far side sends before it
// takes what came back.
const hsStormSendBurst = 256

// hsStormPeer is a storm peer's state: one handshake per attempt, made before
// the storm so that the generator costs next to nothing while it runs, and
// the cookie generator whose MACs every attempt is sent with.
type hsStormPeer struct {
	*hsPeer
	attempt   []*noise.Handshake
	msg       [][]byte // initiation of each attempt, MACs applied at sending
	sent      int
	nextRetry int64
	response  []byte // the response taken (verified after the storm)
	respTo    int
	respAt    time.Duration // when, since the storm began
}

// newHSStormPeers makes the peers' attempts, one pass per attempt so that
// the TAI64N timestamps grow from one attempt to the next.
func newHSStormPeers(sims []*hsPeer, gw noise.PublicKey) ([]*hsStormPeer, error) {
	out := make([]*hsStormPeer, len(sims))
	for i, s := range sims {
		out[i] = &hsStormPeer{hsPeer: s, attempt: make([]*noise.Handshake, hsStormAttempts), msg: make([][]byte, hsStormAttempts)}
	}
	for k := range hsStormAttempts {
		errs := make([]error, len(sims))
		hsParallel(len(sims), func(i int) {
			p := out[i]
			hs := p.hs
			if k > 0 {
				hs = noise.NewHandshake(p.hs.Identity(), gw, noise.PresharedKey{})
			}
			var msg [noise.InitiationSize]byte
			if err := hs.CreateInitiation(&msg, hsIndex(p.i, k)); err != nil {
				errs[i] = err
				return
			}
			p.attempt[k], p.msg[k] = hs, msg[:]
		})
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		time.Sleep(20 * time.Millisecond) // past TAI64N's 2^24 ns granularity
	}
	return out, nil
}

// next returns the frame of the peer's next attempt with its MACs (MAC2
// from the cookie the gateway gave, if any), or nil when none is left.
func (p *hsStormPeer) next() []byte {
	if p.sent >= hsStormAttempts {
		return nil
	}
	msg := slices.Clone(p.msg[p.sent])
	p.hs.CookieGenerator().AddMACs(msg)
	p.sent++
	return p.frame(msg)
}

// measureStorm: every simulated peer initiates at once, then behaves as a
// WireGuard peer does (whitepaper §6.4, §5.4.7, §5.3): a new initiation
// REKEY_TIMEOUT plus jitter after the last one until it has a session,
// with MAC2 once a cookie reply gave it a cookie. A response to the
// attempt in flight gives the peer its session; the responses are verified
// (ConsumeResponse, DeriveKeys) after the storm, to keep the generator's
// Curve25519 work out of the measured seconds.
func measureStorm(e *env, out map[string]any) error {
	n := 10000
	if e.Quick {
		n = 300
	}
	priv, err := noise.NewPrivateKey()
	if err != nil {
		return err
	}
	name := uapiName("wgh")
	t := time.Now()
	sims, err := newHSPeers(n, priv.PublicKey(), gwWANMAC, gwFarMAC)
	if err != nil {
		return err
	}
	peers, err := newHSStormPeers(sims, priv.PublicKey())
	if err != nil {
		return err
	}
	e.Logf("handshake: storm: %d peers with %d initiations each made in %.1f s", n, hsStormAttempts, time.Since(t).Seconds())
	// Rings of 4096 frames, as a WAN NIC's: the storm's far side is ten
	// thousand hosts, which take what the gateway sends them at once; here
	// one goroutine plays them all, sharing the CPUs with the gateway.
	g, err := newGateway(gatewayOptions{Name: name, PrivateKey: priv, Peers: hsConfigs(sims), RingSize: 4096})
	if err != nil {
		return err
	}
	defer g.Close()
	g.Dev.Settle()
	// wg show during the storm: get=1 over the socket, every 100 ms (each
	// formats every peer: about 3.5 MB at 10,000).
	stop := make(chan struct{})
	gets := make(chan []time.Duration, 1)
	go func() {
		var lat []time.Duration
		defer func() { gets <- lat }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			t := time.Now()
			c := lineCounter{prefix: []byte("public_key=")}
			if _, err := uapiRequest(name, "get=1", "", &c); err != nil {
				return
			}
			lat = append(lat, time.Since(t))
		}
	}()

	f := newHSFar(g)
	rng := rand.New(rand.NewPCG(18, 18))
	jitter := func() int64 { return rng.Int64N(int64(protocol.RekeyTimeoutJitterMax)) }
	var backlog [][]byte // frames the far ring did not take yet
	for _, p := range peers {
		backlog = append(backlog, p.next())
		p.nextRetry = int64(protocol.RekeyTimeout) + jitter()
	}
	defer hsProfile(e, "storm")()
	lastTL := time.Now()
	start := time.Now()
	since := func() int64 { return int64(time.Since(start)) }
	initiations, cookies, stale, ringWaits := n, 0, 0, 0
	established, allAt := 0, time.Duration(0)
	// Run until every peer has a session or twice the time after which a
	// peer without one counts as lost (3 × REKEY_TIMEOUT).
	lostAt := 3 * protocol.RekeyTimeout
	take := func(msg []byte) {
		recv, ok := hsReceiver(msg)
		if !ok {
			return
		}
		i := hsOf(recv)
		if i < 0 || i >= n {
			return
		}
		p := peers[i]
		switch msg[0] {
		case noise.TypeCookieReply:
			if p.hs.CookieGenerator().ConsumeReply(msg) == nil {
				cookies++
			}
		case noise.TypeResponse:
			if p.response != nil {
				return
			}
			if int(recv&0xff) != p.sent-1 {
				stale++ // to an attempt the peer has replaced
				return
			}
			p.response, p.respTo, p.respAt = slices.Clone(msg), p.sent-1, time.Since(start)
			established++
			if established == n {
				allAt = time.Since(start)
			}
		}
	}
	// The peers are hosts of their own: each takes what the gateway sends
	// it at once, so the far side is drained whole at every turn, between
	// bursts of at most hsStormSendBurst frames sent. Retries are due on
	// a 1 ms grid (the jitter is up to 333 ms).
	lastScan := int64(0)
	for time.Since(start) < 2*lostAt && established < n {
		busy := false
		for sent := 0; len(backlog) > 0 && sent < hsStormSendBurst && f.send(backlog[0]); sent++ {
			backlog = backlog[1:]
			busy = true
		}
		if len(backlog) > 0 {
			ringWaits++
		}
		for {
			k := f.receive(take)
			busy = busy || k > 0
			if k < len(f.in) {
				break
			}
		}
		now := since()
		if now-lastScan >= int64(time.Millisecond) {
			lastScan = now
			for _, p := range peers {
				if p.response == nil && now >= p.nextRetry {
					p.nextRetry = now + int64(protocol.RekeyTimeout) + jitter()
					if fr := p.next(); fr != nil {
						backlog = append(backlog, fr)
						initiations++
						busy = true
					}
				}
			}
		}
		if !busy {
			time.Sleep(200 * time.Microsecond)
		}
		if hsTimeline() && time.Since(lastTL) > 250*time.Millisecond {
			lastTL = time.Now()
			st := g.Dev.Stats()
			e.Logf("handshake: storm t=%5.2f s: sessions %d, initiations %d, cookies taken %d; gateway: responses %d, cookie replies %d, backlog %d, channel %d, drops %v, fast path drops %v",
				time.Since(start).Seconds(), established, initiations, cookies, st.ResponsesSent, st.CookieRepliesSent,
				st.HandshakeBacklog, len(g.Engine.Handshakes()), st.Drops.List(), fastpath.TotalDrops(g.Engine.Stats()).List())
		}
	}
	close(stop)
	lat := <-gets
	st := g.Dev.Stats()
	drops := fastpath.TotalDrops(g.Engine.Stats())
	// Verify the responses the peers took.
	var bad, late atomic.Int64
	hsParallel(n, func(i int) {
		p := peers[i]
		if p.response == nil {
			return
		}
		hs := p.attempt[p.respTo]
		if hs.ConsumeResponse(p.response) != nil {
			bad.Add(1)
			return
		}
		keys, err := hs.DeriveKeys()
		if err != nil {
			bad.Add(1)
		}
		keys.Zero()
		if p.respAt > lostAt {
			late.Add(1)
		}
	})
	lost := n - established + int(bad.Load()) + int(late.Load())
	storm := map[string]any{
		"peers":                  n,
		"lost":                   lost,
		"initiations":            initiations,
		"retries":                initiations - n,
		"responses_taken":        established,
		"responses_bad":          bad.Load(),
		"responses_stale":        stale,
		"cookie_replies_taken":   cookies,
		"far_ring_waits":         ringWaits,
		"gateway_responses":      st.ResponsesSent,
		"gateway_cookie_replies": st.CookieRepliesSent,
		"gateway_drops":          st.Drops,
		"handshake_queue_full":   drops[fastpath.DropHandshakeQueueFull],
		"handshake_backlog_peak": st.HandshakeBacklogPeak,
		"handshake_workers":      runtime.GOMAXPROCS(0),
	}
	// seconds: until every peer had a session (within the run's 2 ×
	// 3 × REKEY_TIMEOUT, else null); lost counts those without one at
	// 3 × REKEY_TIMEOUT.
	if established == n && bad.Load() == 0 {
		storm["seconds"] = hsRound2(allAt.Seconds())
	} else {
		storm["seconds"] = nil
	}
	storm["lost_after_seconds"] = lostAt.Seconds()
	if len(lat) > 0 {
		slices.Sort(lat)
		storm["uapi_get_count"] = len(lat)
		storm["uapi_get_ms_p50"] = hsRound2(hsMS(lat[len(lat)/2]))
		storm["uapi_get_ms_p99"] = hsRound2(hsMS(lat[len(lat)*99/100]))
		storm["uapi_get_ms_max"] = hsRound2(hsMS(lat[len(lat)-1]))
	}
	out["storm"] = storm
	e.Logf("handshake: storm of %d peers: %d with a session after %v, %d lost; %d initiations, %d cookie replies taken, "+
		"gateway: %d responses, %d cookie replies, queue drops %d, backlog peak %d, drops %v",
		n, established, time.Since(start).Round(time.Millisecond), lost, initiations, cookies,
		st.ResponsesSent, st.CookieRepliesSent, drops[fastpath.DropHandshakeQueueFull], st.HandshakeBacklogPeak, st.Drops.List())
	return nil
}

// measureTimers: a gateway of e.Peers peers, every one with a timer armed
// (a persistent keepalive of 65535 s); first idle (tick_cpu_share), then
// some of them with sessions and a persistent keepalive of 1 s, whose
// keepalives the far end times (timer_lateness_*).
func measureTimers(e *env, out map[string]any) error {
	n := e.Peers
	active, watch, idle := 1000, 8*time.Second, 3*time.Second
	if e.Quick {
		active, watch, idle = 100, 3*time.Second, time.Second
	}
	active = min(active, n)
	priv, err := noise.NewPrivateKey()
	if err != nil {
		return err
	}
	sims, err := newHSPeers(active, priv.PublicKey(), gwWANMAC, gwFarMAC)
	if err != nil {
		return err
	}
	cfgs := scalePeers(n, 18)
	for i, s := range sims {
		cfgs[i].PublicKey = s.pub
	}
	for i := range cfgs {
		cfgs[i].PersistentKeepalive = 65535 * time.Second
	}
	t := time.Now()
	g, err := newGateway(gatewayOptions{PrivateKey: priv, Peers: cfgs})
	if err != nil {
		return err
	}
	defer g.Close()
	e.Logf("handshake: timers: gateway of %d peers built in %.1f s", n, time.Since(t).Seconds())
	// The timers are measured on a gateway that has settled: the background
	// static-static DH of every new peer (one Curve25519 each, on half the
	// CPUs) is done, as in a gateway that has been running.
	t = time.Now()
	g.Dev.Settle()
	e.Logf("handshake: timers: settled in %.1f s more", time.Since(t).Seconds())

	// Idle: let the first ticks file every peer, then time the ticks.
	time.Sleep(300 * time.Millisecond)
	a := g.Dev.TickStats()
	t = time.Now()
	time.Sleep(idle)
	b := g.Dev.TickStats()
	wall := time.Since(t)
	share := float64(b.Busy-a.Busy) / float64(wall)
	out["tick_cpu_share"] = hsRound4(share)
	e.Logf("handshake: timers: %d idle peers (%d in the timer heap): %d ticks, %d evaluations, Tick busy %.3f%% of one core",
		n, b.Scheduled, b.Ticks-a.Ticks, b.Evaluated-a.Evaluated, 100*share)

	// Sessions for the active peers (paced below the under-load mark, so
	// that no cookie round is needed), then a 1 s persistent keepalive.
	f := newHSFar(g)
	const window = 256
	// Each peer sends its initiation (at most window waiting for an
	// answer) and, as a real peer, a new one when REKEY_TIMEOUT passed
	// without a response (one lost in a busy gateway).
	sentAt := make([]time.Time, active)
	next, done := 0, 0
	deadline := time.Now().Add(2 * time.Minute)
	for done < active {
		now := time.Now()
		if now.After(deadline) {
			return fmt.Errorf("timers: %d of %d sessions after two minutes", done, active)
		}
		waiting := 0
		for i := range next {
			if !sims[i].established && now.Sub(sentAt[i]) < protocol.RekeyTimeout {
				waiting++
			}
		}
		for i := range next {
			if waiting >= window {
				break
			}
			if !sims[i].established && now.Sub(sentAt[i]) >= protocol.RekeyTimeout {
				fr, err := sims[i].initiation()
				if err != nil {
					return err
				}
				if f.send(fr) {
					sentAt[i] = now
					waiting++
				}
			}
		}
		for next < active && waiting < window {
			fr, err := sims[next].initiation()
			if err != nil {
				return err
			}
			if !f.send(fr) {
				break
			}
			sentAt[next] = now
			next++
			waiting++
		}
		var ferr error
		k := f.receive(func(msg []byte) {
			recv, ok := hsReceiver(msg)
			if !ok || msg[0] != noise.TypeResponse {
				return
			}
			i := hsOf(recv)
			if i < 0 || i >= active || sims[i].established {
				return
			}
			s := sims[i]
			if err := s.hs.ConsumeResponse(msg); err != nil {
				return
			}
			if s.keys, ferr = s.hs.DeriveKeys(); ferr != nil {
				return
			}
			s.established = true
			done++
			ferr = s.confirm(f)
		})
		if ferr != nil {
			return ferr
		}
		if k == 0 {
			time.Sleep(200 * time.Microsecond)
		}
	}
	time.Sleep(200 * time.Millisecond) // the confirmations promote the sessions
	for i := range cfgs[:active] {
		cfgs[i].PersistentKeepalive = time.Second
		cfgs[i].Endpoint = sims[i].src
	}
	if err := g.Dev.AddPeers(cfgs[:active]); err != nil {
		return err
	}
	last := make([]time.Time, active)
	var late []time.Duration
	keepalives := 0
	t = time.Now()
	for time.Since(t) < watch {
		k := f.receive(func(msg []byte) {
			if msg[0] != noise.TypeTransport || len(msg) != noise.KeepaliveSize {
				return
			}
			recv, _ := hsReceiver(msg)
			i := hsOf(recv)
			if i < 0 || i >= active {
				return
			}
			now := time.Now()
			keepalives++
			if !last[i].IsZero() {
				late = append(late, max(now.Sub(last[i])-time.Second, 0))
			}
			last[i] = now
		})
		if k == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	if len(late) == 0 {
		return fmt.Errorf("timers: no persistent keepalive seen in %v (%d keepalives)", watch, keepalives)
	}
	slices.Sort(late)
	out["timer_lateness_p99_ms"] = hsRound2(hsMS(late[len(late)*99/100]))
	out["timer_lateness_p50_ms"] = hsRound2(hsMS(late[len(late)/2]))
	out["timer_lateness_max_ms"] = hsRound2(hsMS(late[len(late)-1]))
	out["timer_lateness_samples"] = len(late)
	out["timer_peers"] = n
	e.Logf("handshake: timers: %d peers, %d with 1 s keepalives: lateness p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d samples)",
		n, active, hsMS(late[len(late)/2]), hsMS(late[len(late)*99/100]), hsMS(late[len(late)-1]), len(late))
	return nil
}

func hsMS(d time.Duration) float64 { return float64(d) / 1e6 }

func hsRound1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }
func hsRound2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }
func hsRound4(v float64) float64 { return float64(int64(v*10000+0.5)) / 10000 }
