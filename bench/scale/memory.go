package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
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
//     empty gateway to every peer with a session (Go's heap goal and the
//     generator's garbage included: an upper bound);
//   - fastpath_100k_vs_1: the encrypt rate of 64-byte frames through a
//     gateway holding -peers sessions, traffic in bursts of 64 spread
//     round-robin over 10,000 of them, over the rate of a gateway with one
//     peer, measured in alternating rounds in the same run.
func init() { register("memory", runMemory) }

// heapBytes is the live Go heap after two collections.
func heapBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// rssBytes is the process's resident set (VmRSS).
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:")); ok {
			kb, _ := strconv.ParseUint(string(bytes.Fields(v)[0]), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func perPeer(after, before uint64, n int) int64 {
	return (int64(after) - int64(before)) / int64(n)
}

func runMemory(e *env, out map[string]any) error {
	n := e.Peers
	e.Logf("memory: %d simulated peers (keys)", n)
	peers, err := newSimPeers(n)
	if err != nil {
		return err
	}
	g, err := newGateway(gatewayOptions{})
	if err != nil {
		return err
	}
	defer g.Close()
	heap0, rss0 := heapBytes(), rssBytes()

	cfgs := simConfigs(peers)
	t := time.Now()
	if err := g.Dev.AddPeers(cfgs); err != nil {
		return err
	}
	cfgs = nil
	e.Logf("memory: %d peers configured in %.1f s", n, time.Since(t).Seconds())
	heapIdle := heapBytes()
	out["idle_peer_bytes"] = perPeer(heapIdle, heap0, n)

	t = time.Now()
	if err := g.establish(peers, 64, e.Logf); err != nil {
		return err
	}
	if err := waitSessions(g, n, 30*time.Second); err != nil {
		return err
	}
	e.Logf("memory: %d sessions in %.1f s", n, time.Since(t).Seconds())
	heapSess, rssSess := heapBytes(), rssBytes()
	out["session_peer_bytes"] = perPeer(heapSess, heap0, n)
	out["rss_per_peer_bytes"] = perPeer(rssSess, rss0, n)
	e.Logf("memory: heap %d → %d (idle) → %d (sessions) bytes; RSS %d → %d; index table %d slots",
		heap0, heapIdle, heapSess, rss0, rssSess, g.Engine.Indexes().Slots())

	// The rate: a one-peer gateway beside, rounds taking turns.
	one, err := newGateway(gatewayOptions{})
	if err != nil {
		return err
	}
	defer one.Close()
	p1, err := newSimPeers(1)
	if err != nil {
		return err
	}
	if err := one.Dev.AddPeers(simConfigs(p1)); err != nil {
		return err
	}
	if err := one.establish(p1, 1, e.Logf); err != nil {
		return err
	}
	if err := waitSessions(one, 1, 10*time.Second); err != nil {
		return err
	}
	spread := min(n, 10000)
	rounds, dur := 5, time.Second
	if e.Quick {
		rounds, dur = 3, 200*time.Millisecond
	}
	tmplN, tmpl1 := innerFrames(g, spread), innerFrames(one, 1)
	var pktsN, pkts1 uint64
	var timeN, time1 time.Duration
	for r := range rounds {
		k, d := pumpOutbound(one, tmpl1, dur)
		pkts1, time1 = pkts1+k, time1+d
		k, d = pumpOutbound(g, tmplN, dur)
		pktsN, timeN = pktsN+k, timeN+d
		e.Logf("memory: round %d: 1 peer %.0f pps, %d peers over %d %.0f pps", r,
			float64(pkts1)/time1.Seconds(), n, spread, float64(pktsN)/timeN.Seconds())
	}
	if pkts1 == 0 || pktsN == 0 {
		return fmt.Errorf("no packet came out (1 peer: %d, %d peers: %d)", pkts1, n, pktsN)
	}
	rate1, rateN := float64(pkts1)/time1.Seconds(), float64(pktsN)/timeN.Seconds()
	out["fastpath_100k_vs_1"] = rateN / rate1
	out["fastpath_1_peer_pps"] = rate1
	out["fastpath_100k_pps"] = rateN
	return nil
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

// pumpOutbound sends the templates round-robin into g's LAN in bursts of
// 64 for about d and counts what comes out of its WAN; it returns the
// packets out and the time taken (until the last arrived or d plus a
// grace period).
func pumpOutbound(g *scaleGateway, tmpls [][]byte, d time.Duration) (uint64, time.Duration) {
	var got atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		rx := g.Far.Queue(0).RX()
		frames := make([]dataplane.Frame, 64)
		for {
			n := rx.Receive(frames)
			if n > 0 {
				got.Add(uint64(n))
				rx.Free(frames[:n])
				continue
			}
			select {
			case <-stop:
				return
			default:
				runtime.Gosched()
			}
		}
	})
	tx := g.Host.Queue(0).TX()
	frames := make([]dataplane.Frame, 64)
	k := 0
	start := time.Now()
	for time.Since(start) < d {
		n := tx.Alloc(frames)
		for i := range frames[:n] {
			t := tmpls[k]
			if k++; k == len(tmpls) {
				k = 0
			}
			frames[i].SetLen(len(t))
			copy(frames[i].Data(), t)
		}
		sent := tx.Transmit(frames[:n])
		tx.Free(frames[sent:n])
		if sent < n || n == 0 {
			runtime.Gosched()
		}
	}
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	return got.Load(), elapsed
}
