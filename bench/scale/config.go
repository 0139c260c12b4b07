//go:build linux

package main

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/noise"
)

// The config part (issue 20): the configuration of e.Peers peers, each with
// one /32 and one /128 and an endpoint of its own (scaleEndpoint), through
// the real UAPI socket and from a file. The gateway asks this process's
// namespace for the source toward an endpoint not heard from, as wgpio
// up's does (newGateway's Routes).
//
//	uapi_set_100k_seconds        one set=1 request of every peer, as `wg setconf` sends it
//	uapi_get_100k_seconds        one get=1 request read to its end (what `wg show NAME dump` reads)
//	wg_show_dump_100k_seconds    `wg show NAME dump` itself, when wg(8) is installed
//	(both also with the suffix _after_set: read at once after the set,
//	while the background DH of the new peers still runs)
//	uapi_single_set_at_100k_ms   one `wg set NAME peer K allowed-ips ...` at e.Peers peers: median
//	uapi_single_set_at_100k_max_ms   ... and the slowest of the tries
//	startup_100k_seconds         config.Load of a file of every peer, then the gateway built and started
//	                             with them (the path of wgpio up), up to its UAPI socket answering
//	route_change_refresh_100k_ms a change of routes seen (the cache emptied, RefreshSources) at
//	                             e.Peers endpoints not heard from: what the device does at once
//	route_reask_100k_seconds     the route toward every endpoint asked again, one at a time, as the
//	                             first initiations after the change ask it between them (no lock held)
//	device_lock_during_reask_max_ms  the device's lock taken meanwhile, every ms: the longest wait
//	uapi_single_set_during_reask_ms  the single-peer set (which takes the device's lock) meanwhile: median
//
// The progress lines give each figure's process CPU time beside it (all
// goroutines, the background ones included): on a loaded machine the wall
// time includes waiting for a CPU.
func init() { register("config", runConfig) }

// cpuTime is the process's user and system CPU time so far, in seconds.
func cpuTime() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func runConfig(e *env, out map[string]any) error {
	n := e.Peers
	t := time.Now()
	peers := scalePeers(n, 1)
	for i := range peers {
		peers[i].Endpoint = scaleEndpoint(i)
	}
	e.Logf("config: %d peer configurations made in %.1f s", n, time.Since(t).Seconds())
	priv, err := noise.NewPrivateKey()
	if err != nil {
		return err
	}
	f := &config.File{Interface: config.Interface{PrivateKey: priv, ListenPort: gwListen}}
	for _, p := range peers {
		f.Peers = append(f.Peers, config.Peer{PublicKey: p.PublicKey, AllowedIPs: p.AllowedIPs, Endpoint: p.Endpoint})
	}

	if err := measureUAPI(e, out, f, peers); err != nil {
		return err
	}
	return measureStartup(e, out, f)
}

// measureUAPI sets f's peers on an empty gateway through its socket, reads
// them back, and changes one peer's allowed IPs a few times.
func measureUAPI(e *env, out map[string]any, f *config.File, peers []gateway.PeerConfig) error {
	n := len(peers)
	name := uapiName("wgs")
	g, err := newGateway(gatewayOptions{Name: name, PrivateKey: f.Interface.PrivateKey})
	if err != nil {
		return err
	}
	defer g.Close()
	body := f.UAPI()
	e.Logf("config: set of %d peers (%.1f MB) on %s", n, float64(len(body))/1e6, uapiPath(name))
	t, cpu := time.Now(), cpuTime()
	if err := uapiSet(name, body); err != nil {
		return err
	}
	set := time.Since(t).Seconds()
	out["uapi_set_100k_seconds"] = set
	e.Logf("config: set %d peers in %.3f s (process CPU %.3f s)", n, set, cpuTime()-cpu)

	// Right after the set, the device computes the new peers' static-static
	// DH in the background (one core for a few seconds): read the
	// configuration then, and again once that is done, as on a gateway that
	// has been running (the figures the issue names).
	if err := measureGet(e, out, name, n, "_after_set"); err != nil {
		return err
	}
	t = time.Now()
	g.Dev.Settle()
	e.Logf("config: background DH of %d peers done %.1f s later", n, time.Since(t).Seconds())
	if err := measureGet(e, out, name, n, ""); err != nil {
		return err
	}

	// wg set NAME peer K allowed-ips A,B: replace one peer's prefixes by
	// ones no peer holds, peers spread over the configuration.
	tries := 9
	if e.Quick {
		tries = 5
	}
	var ms []float64
	cpu = cpuTime()
	for i := range tries {
		k := (i*n)/tries + i%2
		var b strings.Builder
		fmt.Fprintf(&b, "public_key=%s\nreplace_allowed_ips=true\n", peers[k].PublicKey.Hex())
		for _, p := range peerPrefixes(k, 1+i) {
			fmt.Fprintf(&b, "allowed_ip=%s\n", p)
		}
		t = time.Now()
		if err := uapiSet(name, b.String()); err != nil {
			return err
		}
		ms = append(ms, float64(time.Since(t).Microseconds())/1000)
	}
	slices.Sort(ms)
	out["uapi_single_set_at_100k_ms"] = ms[len(ms)/2]
	out["uapi_single_set_at_100k_max_ms"] = ms[len(ms)-1]
	e.Logf("config: single-peer set at %d peers: median %.2f ms, max %.2f ms over %d tries (process CPU %.2f ms per try)",
		n, ms[len(ms)/2], ms[len(ms)-1], tries, (cpuTime()-cpu)*1000/float64(tries))
	return nil
}

// measureStartup writes f to a file and starts a gateway from it as wgpio
// up does: config.Load, the peers' configurations, the engine and the
// device with every peer, the workers and the UAPI socket.
func measureStartup(e *env, out map[string]any, f *config.File) error {
	dir, err := os.MkdirTemp("", "wgpio-scale")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "wgs.conf")
	if err := os.WriteFile(path, f.Marshal(), 0o600); err != nil {
		return err
	}
	n := len(f.Peers)
	e.Logf("config: start-up from %s (%d peers)", path, n)
	name := uapiName("wgs")
	t, cpu := time.Now(), cpuTime()
	lf, err := config.Load(path)
	if err != nil {
		return err
	}
	pcs := make([]gateway.PeerConfig, 0, len(lf.Peers))
	for _, p := range lf.Peers {
		pcs = append(pcs, gateway.PeerConfig{
			PublicKey: p.PublicKey, PresharedKey: p.PresharedKey, Endpoint: p.Endpoint,
			PersistentKeepalive: time.Duration(p.PersistentKeepalive) * time.Second,
			AllowedIPs:          p.AllowedIPs,
		})
	}
	loaded := time.Since(t).Seconds()
	g, err := newGateway(gatewayOptions{Name: name, PrivateKey: lf.Interface.PrivateKey, Peers: pcs})
	if err != nil {
		return err
	}
	defer g.Close()
	up := time.Since(t).Seconds()
	out["startup_100k_seconds"] = up
	e.Logf("config: started with %d peers in %.3f s (file parsed in %.3f s; process CPU %.3f s)", n, up, loaded, cpuTime()-cpu)
	c := &lineCounter{prefix: []byte("public_key=")}
	if errno, err := uapiRequest(name, "get=1", "", c); err != nil || errno != 0 {
		return fmt.Errorf("uapi get after start-up: errno=%d %v", errno, err)
	}
	if c.n != n {
		return fmt.Errorf("after start-up: %d peers, want %d", c.n, n)
	}
	return measureRouteChange(e, out, g, pcs)
}

// measureRouteChange has g see a change of routes with every peer's
// endpoint not heard from, then asks the route toward each again, as
// their first initiations would, while single-peer sets take the
// device's lock.
func measureRouteChange(e *env, out map[string]any, g *scaleGateway, pcs []gateway.PeerConfig) error {
	n := len(pcs)
	g.Dev.Settle() // the start-up's background DH done, as on a gateway that has been running
	t := time.Now()
	g.Routes.Flush()
	g.Dev.RefreshSources()
	refresh := float64(time.Since(t).Microseconds()) / 1000
	out["route_change_refresh_100k_ms"] = refresh
	done := make(chan float64)
	t, cpu := time.Now(), cpuTime()
	asked := g.Routes.Lookups.Load()
	go func() {
		for _, p := range pcs {
			g.Routes.Source(p.Endpoint.Addr())
		}
		done <- time.Since(t).Seconds()
	}()
	// Meanwhile: the device's lock taken every millisecond (WANAddrs, as
	// a handshake or the UAPI takes it), a single-peer set every 100 ms.
	var ms, lockMs []float64
	var reask float64
	nextSet := time.Now().Add(100 * time.Millisecond)
	for i := 0; ; i++ {
		select {
		case reask = <-done:
		case <-time.After(time.Millisecond):
			st := time.Now()
			g.Dev.WANAddrs()
			lockMs = append(lockMs, float64(time.Since(st).Microseconds())/1000)
			if time.Now().Before(nextSet) {
				continue
			}
			nextSet = time.Now().Add(100 * time.Millisecond)
			k := (i * 7919) % n
			b := fmt.Sprintf("public_key=%s\nreplace_allowed_ips=true\n", pcs[k].PublicKey.Hex())
			for _, p := range pcs[k].AllowedIPs {
				b += fmt.Sprintf("allowed_ip=%s\n", p)
			}
			st = time.Now()
			if err := uapiSet(g.Name, b); err != nil {
				return err
			}
			ms = append(ms, float64(time.Since(st).Microseconds())/1000)
			continue
		}
		break
	}
	out["route_reask_100k_seconds"] = reask
	e.Logf("config: a change of routes at %d endpoints not heard from: seen in %.2f ms; the %d routes asked again in %.3f s (process CPU %.3f s)",
		n, refresh, g.Routes.Lookups.Load()-asked, reask, cpuTime()-cpu)
	if len(lockMs) > 0 {
		slices.Sort(lockMs)
		out["device_lock_during_reask_max_ms"] = lockMs[len(lockMs)-1]
		e.Logf("config: the device's lock taken meanwhile in: median %.3f ms, 99th percentile %.3f ms, max %.3f ms over %d tries",
			lockMs[len(lockMs)/2], lockMs[len(lockMs)*99/100], lockMs[len(lockMs)-1], len(lockMs))
	}
	if len(ms) > 0 {
		slices.Sort(ms)
		out["uapi_single_set_during_reask_ms"] = ms[len(ms)/2]
		e.Logf("config: single-peer set meanwhile: median %.2f ms, max %.2f ms over %d tries", ms[len(ms)/2], ms[len(ms)-1], len(ms))
	}
	return nil
}

// scaleEndpoint is peer i's endpoint in the config part: an address of
// its own in 100.64.0.0/10 (4M of them; the kernel's route toward it is
// asked, nothing is sent), port 51820.
func scaleEndpoint(i int) netip.AddrPort {
	x := uint32(100)<<24 | uint32(64)<<16 + uint32(i)%(1<<22)
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)}), 51820)
}

// measureGet reads the configuration of n peers through the socket
// (uapi_get_100k_seconds) and with wg(8) (wg_show_dump_100k_seconds), the
// keys suffixed with suffix.
func measureGet(e *env, out map[string]any, name string, n int, suffix string) error {
	t, cpu := time.Now(), cpuTime()
	c := &lineCounter{prefix: []byte("public_key=")}
	if errno, err := uapiRequest(name, "get=1", "", c); err != nil || errno != 0 {
		return fmt.Errorf("uapi get: errno=%d %v", errno, err)
	}
	get := time.Since(t).Seconds()
	if c.n != n {
		return fmt.Errorf("uapi get: %d peers, want %d", c.n, n)
	}
	out["uapi_get_100k_seconds"+suffix] = get
	e.Logf("config: get%s of %d peers in %.3f s (process CPU %.3f s)", suffix, n, get, cpuTime()-cpu)
	wg, err := exec.LookPath("wg")
	if err != nil {
		e.Logf("config: wg(8) not installed: wg_show_dump_100k_seconds not measured")
		return nil
	}
	t = time.Now()
	b, err := exec.Command(wg, "show", name, "dump").Output()
	if err != nil {
		return fmt.Errorf("wg show %s dump: %w", name, err)
	}
	dump := time.Since(t).Seconds()
	if got := strings.Count(string(b), "\n") - 1; got != n {
		return fmt.Errorf("wg show %s dump: %d peers, want %d", name, got, n)
	}
	out["wg_show_dump_100k_seconds"+suffix] = dump
	e.Logf("config: wg show%s %s dump of %d peers in %.3f s", suffix, name, n, dump)
	return nil
}
