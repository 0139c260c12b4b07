//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/tundev"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/internal/reassembly"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestMetricsSlowClient: the metrics endpoint, which may listen on every
// address, disconnects a client that never finishes its request headers
// (slowloris) or sits idle, and still answers a proper request.
func TestMetricsSlowClient(t *testing.T) {
	const timeout = 100 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := metricsServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }), timeout)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	for _, send := range []string{"", "GET /metrics HTTP/1.1\r\nHost: x\r\n"} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, send)
		c.SetReadDeadline(time.Now().Add(50 * timeout))
		start := time.Now()
		_, err = io.Copy(io.Discard, c) // returns when the server closes
		c.Close()
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("client stalled after %q: still connected after %v, want closed after %v", send, time.Since(start), timeout)
		}
	}
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok\n" {
		t.Errorf("GET /metrics = %q, want %q", body, "ok\n")
	}
}

// TestStatsStalledClient: a `wgpio stats` client that connects and never
// reads a reply larger than the socket buffer (thousands of peers) delays
// no other client: the next one is answered while the server still waits
// for the stalled one, which then gets its whole reply too.
func TestStatsStalledClient(t *testing.T) {
	testenv.Root(t)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Long enough that the second client, served one connection at a
	// time, would wait past its read deadline below.
	defer func(d time.Duration) { statsWriteTimeout = d }(statsWriteTimeout)
	statsWriteTimeout = 2 * time.Minute
	name := topo.UniqueName("wgps")
	big := strings.Repeat("x", 16<<20)
	stop, err := serveStats(slog.New(slog.DiscardHandler), name, func() any { return big })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	path := filepath.Join(runDir, name+".stats")
	stalled, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	waitReceiveQueue(t, stalled, 64<<10) // the server is now writing to it
	want := int64(len(big)) + 3          // a JSON string: quotes and a newline
	for i := range statsClients + 2 {    // more than the slots: each finishes
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(time.Minute))
		n, err := io.Copy(io.Discard, c)
		c.Close()
		if err != nil || n != want {
			t.Fatalf("client %d behind a stalled one: read %d bytes, %v; want the %d-byte reply", i+2, n, err, want)
		}
	}
	stalled.SetReadDeadline(time.Now().Add(time.Minute))
	if n, err := io.Copy(io.Discard, stalled); err != nil || n != want {
		t.Errorf("the stalled client, reading at last: %d bytes, %v; want the %d-byte reply", n, err, want)
	}
}

// waitReceiveQueue waits, up to 10 s, until at least n bytes are queued
// unread in the receive buffer of the unix socket c: a server writing to
// a client that does not read is then blocked in its write (a unix stream
// socket's writer waits on the reader's buffer) or about to be.
func waitReceiveQueue(t *testing.T, c net.Conn, n int) {
	t.Helper()
	rc, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	queued := func() (q int) {
		rc.Control(func(fd uintptr) { q, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
		return q
	}
	for deadline := time.Now().Add(10 * time.Second); queued() < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes queued for the client after 10 s, want %d: the server never filled its buffer", queued(), n)
		}
	}
}

// TestMetricsKernelDrops: the AF_XDP sockets' losses the kernel counts
// (XDP_STATISTICS) are exported per port, queue and reason, each frame
// once: the fill-ring-empty events, already in rx_dropped, apart.
func TestMetricsKernelDrops(t *testing.T) {
	q := fastpath.QueueStats{Fragmented: 2, OuterFragmented: 5, OuterFragments: 11}
	q.WAN.Backend = map[string]uint64{"xsk_rx_ring_full": 7, "xsk_rx_dropped": 3, fillRingEmptyKey: 3, "xsk_rx_invalid_descs": 0, "xsk_tx_invalid_descs": 0}
	s := GatewayStats{Name: "wg0", Queues: []fastpath.QueueStats{q}}
	body := gatherText(t, newCollector("wg0", config.DefaultMetricsPeers, func() GatewayStats { return s }, func(int) ([]PeerStat, bool) { return s.Peers, true }))
	for _, want := range []string{
		`wgpio_port_kernel_drops_total{device="wg0",port="wan",queue="0",reason="rx_ring_full"} 7`,
		`wgpio_port_kernel_drops_total{device="wg0",port="wan",queue="0",reason="rx_dropped"} 3`,
		`wgpio_port_kernel_drops_total{device="wg0",port="wan",queue="0",reason="rx_invalid_descs"} 0`,
		`wgpio_port_fill_ring_empty_total{device="wg0",port="wan",queue="0"} 3`,
		// (Not kernel drops: the fragment counters, inner and outer, beside them.)
		`wgpio_packets_fragmented_total{device="wg0",queue="0"} 2`,
		`wgpio_outer_packets_fragmented_total{device="wg0",queue="0"} 5`,
		`wgpio_outer_fragments_total{device="wg0",queue="0"} 11`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// The LAN port's Stats have no socket counters (closed, or another
	// backend): nothing is made up for it.
	if strings.Contains(body, `port="lan",queue="0",reason="rx_dropped"`) {
		t.Error("kernel drops exported for a port without socket counters")
	}
	if strings.Contains(body, `reason="rx_fill_ring_empty_descs"`) {
		t.Error("the fill-ring-empty events are exported as a drop reason: they are in rx_dropped already")
	}
}

// TestMetricsEveryQueueCounter: each counter of a fast-path queue that
// wgpio stats -json prints (fastpath.QueueStats' uint64 fields) is in
// /metrics too, with its value, so that what the decrypted packets became
// adds up there as well: the packets for the host's own addresses
// (Exception) and the inner fragments sent (Fragments) were JSON-only.
// NeighbourFrames, owned mode's ARP and NDP frames, are the neighbour
// handler's to count (wgpio_neighbour_*).
func TestMetricsEveryQueueCounter(t *testing.T) {
	var q fastpath.QueueStats
	v := reflect.ValueOf(&q).Elem()
	want := map[string]uint64{}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Type.Kind() != reflect.Uint64 || f.Name == "NeighbourFrames" {
			continue
		}
		n := uint64(1000 + i) // a value no other counter of the queue has
		v.Field(i).SetUint(n)
		want[f.Name] = n
	}
	s := GatewayStats{Name: "wg0", Queues: []fastpath.QueueStats{q}}
	body := gatherText(t, newCollector("wg0", config.DefaultMetricsPeers, func() GatewayStats { return s }, func(int) ([]PeerStat, bool) { return nil, true }))
	for name, n := range want {
		if !strings.Contains(body, fmt.Sprintf(`{device="wg0",queue="0"} %d`+"\n", n)) {
			t.Errorf("no metric of queue 0 has QueueStats.%s's value %d", name, n)
		}
	}
	for _, line := range []string{
		`wgpio_packets_for_host_total{device="wg0",queue="0"} `,
		`wgpio_fragments_total{device="wg0",queue="0"} `,
	} {
		if !strings.Contains(body, line) {
			t.Errorf("metrics lack %s", line)
		}
	}
}

// TestMetricsCompatICMP: the compat modes' ICMP errors (sent,
// suppressed, refused by the kernel), fragments and peer-to-peer packets,
// counted in wgpio stats, are in /metrics too.
func TestMetricsCompatICMP(t *testing.T) {
	s := GatewayStats{Name: "wg0",
		TUN:    &tundev.TUNStats{ICMPErrors: 6, ICMPSuppressed: 14, ICMPSendErrors: 2},
		Compat: &CompatStats{LAN: tundev.PortStats{ICMPErrors: 5, ICMPSuppressed: 9, Fragmented: 3, PeerToPeer: 4}}}
	body := gatherText(t, newCollector("wg0", config.DefaultMetricsPeers, func() GatewayStats { return s }, func(int) ([]PeerStat, bool) { return nil, true }))
	for _, want := range []string{
		`wgpio_tun_icmp_errors_sent_total{device="wg0"} 6`,
		`wgpio_tun_icmp_errors_suppressed_total{device="wg0"} 14`,
		`wgpio_tun_icmp_send_errors_total{device="wg0"} 2`,
		`wgpio_compat_icmp_errors_sent_total{device="wg0"} 5`,
		`wgpio_compat_icmp_errors_suppressed_total{device="wg0"} 9`,
		`wgpio_compat_packets_fragmented_total{device="wg0"} 3`,
		`wgpio_compat_packets_peer_to_peer_total{device="wg0"} 4`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
}

// TestCompatBindFragments: the compat bind's datagrams over the WAN MTU
// sent as fragments, and their fragments, and those received via the
// kernel (reassembled), are in /metrics, wgpio stats and its JSON.
func TestCompatBindFragments(t *testing.T) {
	s := GatewayStats{Name: "wg0", Mode: string(config.ModeCompat), Compat: &CompatStats{Bind: bind.Stats{RXPackets: 6, FromKernel: 5, TXPackets: 9, Fragmented: 3, Fragments: 7}}}
	body := gatherText(t, newCollector("wg0", config.DefaultMetricsPeers, func() GatewayStats { return s }, func(int) ([]PeerStat, bool) { return nil, true }))
	for _, want := range []string{
		`wgpio_compat_wan_datagrams_fragmented_total{device="wg0"} 3`,
		`wgpio_compat_wan_fragments_total{device="wg0"} 7`,
		`wgpio_compat_wan_datagrams_from_kernel_total{device="wg0"} 5`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
	if out, want := capturePrintStats(t, s), "wan datagrams over the MTU sent as fragments: 3, in 7 fragments\n"; !strings.Contains(out, want) {
		t.Errorf("wgpio stats does not say %q:\n%s", want, out)
	}
	if out, want := capturePrintStats(t, s), "wan datagrams received via kernel (reassembled): 5\n"; !strings.Contains(out, want) {
		t.Errorf("wgpio stats does not say %q:\n%s", want, out)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"fragmented":3,"fragments":7`, `"rx_packets":6,"from_kernel":5`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("wgpio stats -json lacks %s:\n%s", want, b)
		}
	}
}

// TestReassemblyStats: the owned address mode's reassembly of fragmented
// WireGuard datagrams is in /metrics, wgpio stats and its JSON, drops by
// reason; a gateway without it (shared mode) exports none of it.
func TestReassemblyStats(t *testing.T) {
	r := fastpath.ReassemblyStats{Fragments: 9, Reassembled: 3, InProgress: 1, BytesHeld: 2048}
	r.Drops[reassembly.DropOverlap] = 2
	r.Drops[reassembly.DropTimeout] = 1
	s := GatewayStats{Name: "wg0", Queues: make([]fastpath.QueueStats, 1), Reassembly: &r}
	body := gatherText(t, newCollector("wg0", config.DefaultMetricsPeers, func() GatewayStats { return s }, func(int) ([]PeerStat, bool) { return nil, true }))
	for _, want := range []string{
		`wgpio_reassembly_fragments_total{device="wg0"} 9`,
		`wgpio_reassembly_datagrams_total{device="wg0"} 3`,
		`wgpio_reassembly_datagrams_in_progress{device="wg0"} 1`,
		`wgpio_reassembly_bytes_held{device="wg0"} 2048`,
		`wgpio_reassembly_drops_total{device="wg0",reason="overlap"} 2`,
		`wgpio_reassembly_drops_total{device="wg0",reason="timeout"} 1`,
		`wgpio_reassembly_drops_total{device="wg0",reason="table_full"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
	want := "reassembly (owned address mode): 9 fragments, 3 datagrams reassembled, 1 in progress (2048 bytes held), fragments dropped: overlap=2 timeout=1\n"
	if out := capturePrintStats(t, s); !strings.Contains(out, want) {
		t.Errorf("wgpio stats does not say %q:\n%s", want, out)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if w := `"reassembly":{"fragments":9,"reassembled":3,"in_progress":1,"bytes_held":2048,"drops":{"overlap":2,"timeout":1}}`; !strings.Contains(string(b), w) {
		t.Errorf("wgpio stats -json lacks %s:\n%s", w, b)
	}
	s.Reassembly = nil
	if body := gatherText(t, newCollector("wg0", config.DefaultMetricsPeers, func() GatewayStats { return s }, func(int) ([]PeerStat, bool) { return nil, true })); strings.Contains(body, "wgpio_reassembly") {
		t.Error("reassembly metrics exported without reassembly")
	}
	if out := capturePrintStats(t, s); strings.Contains(out, "reassembly") {
		t.Errorf("wgpio stats prints reassembly without it:\n%s", out)
	}
}

// gatherText registers c alone and returns what /metrics would print.
func gatherText(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	// Pedantic: every metric collected must be of a descriptor the
	// collector's Describe lists.
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// TestReloadMetrics: /metrics says whether the last reload applied the
// file and when the last one that did was (the start before any), in the
// names Prometheus' servers use, so that a systemctl reload of a broken
// file, which succeeds as a command, shows.
func TestReloadMetrics(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	st := newReloadState(start)
	reg := prometheus.NewRegistry()
	for _, c := range reloadMetrics("wg0", st) {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	read := func() (ok, at float64) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			switch mf.GetName() {
			case "wgpio_config_last_reload_successful":
				ok = mf.GetMetric()[0].GetGauge().GetValue()
			case "wgpio_config_last_reload_success_timestamp_seconds":
				at = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return ok, at
	}
	for _, step := range []struct {
		what   string
		err    error
		at     time.Time
		ok     float64
		lastOK time.Time
	}{
		{"start", nil, time.Time{}, 1, start},
		{"a file that does not parse", errors.New("wg0.conf:3: unknown key"), start.Add(time.Minute), 0, start},
		{"a reload applied", nil, start.Add(2 * time.Minute), 1, start.Add(2 * time.Minute)},
	} {
		if !step.at.IsZero() {
			st.record(step.err, step.at)
		}
		if ok, at := read(); ok != step.ok || at != float64(step.lastOK.Unix()) {
			t.Errorf("after %s: successful = %v, success timestamp = %v; want %v, %v", step.what, ok, at, step.ok, step.lastOK.Unix())
		}
	}
}

// TestMetricsPeerLimit: the per-peer series are exported only while the
// gateway has at most MetricsPeers peers (none with off), the peers are
// not even read beyond it, and wgpio_peers counts them in every case.
func TestMetricsPeerLimit(t *testing.T) {
	peers := []PeerStat{{PublicKey: "a"}, {PublicKey: "b"}, {PublicKey: "c"}}
	s := GatewayStats{Name: "wg0", Device: &gateway.Stats{PeersConfigured: uint64(len(peers))}}
	for _, tc := range []struct {
		maxPeers   int
		wantSeries int
	}{{config.DefaultMetricsPeers, 9}, {3, 9}, {2, 0}, {config.Off, 0}} {
		reads := 0
		reg := prometheus.NewRegistry()
		reg.MustRegister(newCollector("wg0", tc.maxPeers, func() GatewayStats { return s }, func(max int) ([]PeerStat, bool) { reads++; return peers, len(peers) <= max }))
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		series, count := 0, -1.0
		for _, mf := range mfs {
			switch name := mf.GetName(); {
			case strings.HasPrefix(name, "wgpio_peer_"):
				series += len(mf.GetMetric())
			case name == "wgpio_peers":
				count = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		if series != tc.wantSeries || count != 3 {
			t.Errorf("MetricsPeers %d, 3 peers: %d per-peer series and wgpio_peers %v, want %d and 3", tc.maxPeers, series, count, tc.wantSeries)
		}
		if tc.wantSeries == 0 && reads != 0 {
			t.Errorf("MetricsPeers %d, 3 peers: the peers were read %d times, want none", tc.maxPeers, reads)
		}
	}
}

// TestMetricsPeersAddedDuringScrape: peers added between a scrape's count
// of the peers (within MetricsPeers) and its read of them are not read:
// the scrape exports no per-peer series then, rather than every peer's
// (before, at 100,000 peers, a read of all 300,000 series the limit is
// there to avoid), and the next scrape, counting them, reads none.
func TestMetricsPeersAddedDuringScrape(t *testing.T) {
	dev := deviceWithPeers(t, 3)
	added := false
	stats := func() GatewayStats {
		st := dev.Stats()
		if !added { // after the count, before the read
			if err := dev.AddPeers(testPeerConfigs(3, 5)); err != nil {
				t.Fatal(err)
			}
			added = true
		}
		return GatewayStats{Device: &st}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector("wg0", 3, stats, boundedPeerStats(dev)))
	for _, want := range []float64{3, 8} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		series, count := 0, -1.0
		for _, mf := range mfs {
			switch name := mf.GetName(); {
			case strings.HasPrefix(name, "wgpio_peer_"):
				series += len(mf.GetMetric())
			case name == "wgpio_peers":
				count = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		if series != 0 || count != want {
			t.Errorf("MetricsPeers 3, %v peers counted, 8 configured: %d per-peer series and wgpio_peers %v, want 0 and %v", want, series, count, want)
		}
	}
}

// TestListenMetricsInUse: a MetricsAddress whose port another process
// holds is an error naming the file, line and key (or -metrics-addr), as
// the other errors found at start are; it said only "metrics address
// ...: bind: address already in use".
func TestListenMetricsInUse(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	w := config.WGPIO{MetricsAddress: addr, Lines: map[string]int{"MetricsAddress": 12}}
	_, err = listenMetrics("wg0.conf", w)
	if want := `wg0.conf:12: key "MetricsAddress": cannot serve metrics on ` + addr; err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("listenMetrics(%s, held) = %v, want %q… naming the cause", addr, err, want)
	}
	w.Lines = map[string]int{} // from -metrics-addr
	if _, err := listenMetrics("wg0.conf", w); err == nil || !strings.HasPrefix(err.Error(), "up: -metrics-addr: cannot serve metrics on "+addr) {
		t.Errorf("listenMetrics(-metrics-addr %s, held) = %v, want it to name -metrics-addr", addr, err)
	}
	w.MetricsAddress = "127.0.0.1:0"
	ln, err := listenMetrics("wg0.conf", w)
	if err != nil {
		t.Fatalf("listenMetrics(127.0.0.1:0) = %v", err)
	}
	ln.Close()
}

// TestCompatXDPCounters: in compat mode too, wgpio stats and /metrics
// show the XDP programs' counters: the frames the LAN's program left to
// the kernel (not IP, a truncated IP header, another VLAN's), which the
// bind and tundev never see, are counted there only.
func TestCompatXDPCounters(t *testing.T) {
	s := GatewayStats{Name: "wg0", Mode: string(config.ModeCompat), Compat: &CompatStats{},
		XDP: map[string]map[string]uint64{"lan": {"xdp_pass": 50, "xdp_redirect_prefix": 3}, "wan": {"xdp_redirect_udp": 6}}}
	body := gatherText(t, newCollector("wg0", config.DefaultMetricsPeers, func() GatewayStats { return s }, func(int) ([]PeerStat, bool) { return nil, true }))
	if want := `wgpio_xdp_frames_total{device="wg0",port="lan",verdict="pass"} 50`; !strings.Contains(body, want) {
		t.Errorf("metrics lack %s:\n%s", want, body)
	}
	out := capturePrintStats(t, s)
	for _, want := range []string{"xdp lan: xdp_pass=50 xdp_redirect_prefix=3\n", "xdp wan: xdp_redirect_udp=6\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("wgpio stats does not say %q:\n%s", want, out)
		}
	}
}

// TestCompatKernelDrops: in compat mode too, the frames the kernel
// dropped at the ports' AF_XDP sockets before the bind or tundev read them
// (a full RX ring while wireguard-go lagged: a stalled gateway lost tens of
// thousands of packets that no counter showed) are in /metrics, under the
// fast path's names, and in wgpio stats.
func TestCompatKernelDrops(t *testing.T) {
	s := GatewayStats{Name: "wg0", Mode: string(config.ModeCompat), Compat: &CompatStats{
		WANQueues: []dataplane.Stats{{Backend: map[string]uint64{"xsk_rx_ring_full": 78225, "xsk_rx_dropped": 0, fillRingEmptyKey: 4}}},
		LANQueues: []dataplane.Stats{{Backend: map[string]uint64{"xsk_rx_ring_full": 0, "xsk_rx_dropped": 9}}, {}},
	}}
	body := gatherText(t, newCollector("wg0", config.DefaultMetricsPeers, func() GatewayStats { return s }, func(int) ([]PeerStat, bool) { return nil, true }))
	for _, want := range []string{
		`wgpio_port_kernel_drops_total{device="wg0",port="wan",queue="0",reason="rx_ring_full"} 78225`,
		`wgpio_port_fill_ring_empty_total{device="wg0",port="wan",queue="0"} 4`,
		`wgpio_port_kernel_drops_total{device="wg0",port="lan",queue="0",reason="rx_dropped"} 9`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
	out := capturePrintStats(t, s)
	for _, want := range []string{"wan   0      xsk_rx_ring_full=78225\n", "lan   0      xsk_rx_dropped=9\n", "lan   1      none\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("wgpio stats does not say %q:\n%s", want, out)
		}
	}
}

// TestMetricsProcessHealth: /metrics has what a long run watches for
// leaks besides the gateway's counters: the Go heap, goroutines and
// threads, and the process's resident memory and open files.
func TestMetricsProcessHealth(t *testing.T) {
	s := GatewayStats{Name: "wg0", Device: &gateway.Stats{}}
	reg, err := metricsRegistry("wg0", func() GatewayStats { return s },
		func(int) ([]PeerStat, bool) { return nil, true }, 1000, newReloadState(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]float64{}
	for _, mf := range mfs {
		if m := mf.GetMetric(); len(m) == 1 && m[0].GetGauge() != nil {
			have[mf.GetName()] = m[0].GetGauge().GetValue()
		}
	}
	for _, name := range []string{"go_goroutines", "go_threads", "go_memstats_heap_inuse_bytes",
		"process_resident_memory_bytes", "process_open_fds"} {
		if v, ok := have[name]; !ok || v <= 0 {
			t.Errorf("%s = %v (exported: %v); want a positive gauge", name, v, ok)
		}
	}
	if _, ok := have["wgpio_peers"]; !ok {
		t.Error("wgpio_peers missing beside the process's metrics")
	}
}

// TestNeighbourStats: the owned address mode's ARP and NDP counters (the
// responders' replies and drops by reason, the tables' requests, failures,
// refusals and evictions, the address conflicts) are in /metrics, wgpio
// stats and its JSON; a gateway without them (shared mode) exports none.
// Before, the frames the responders dropped were counted nowhere a user
// could see.
func TestNeighbourStats(t *testing.T) {
	n := map[string]fastgw.NeighbourStats{
		"lan": {Replies: 5, Drops: map[string]uint64{"op": 3, "not-for-us": 2}, Requests: 4, Failed: 1, Full: 7, Evicted: 6, Conflicts: 1, Claims: 9},
		"wan": {Replies: 1},
	}
	s := GatewayStats{Name: "wg0", Queues: make([]fastpath.QueueStats, 1), Neighbours: n}
	body := gatherText(t, newCollector("wg0", config.DefaultMetricsPeers, func() GatewayStats { return s }, func(int) ([]PeerStat, bool) { return nil, true }))
	for _, want := range []string{
		`wgpio_neighbour_replies_total{device="wg0",port="lan"} 5`,
		`wgpio_neighbour_drops_total{device="wg0",port="lan",reason="op"} 3`,
		`wgpio_neighbour_drops_total{device="wg0",port="lan",reason="not-for-us"} 2`,
		`wgpio_neighbour_requests_total{device="wg0",port="lan"} 4`,
		`wgpio_neighbour_failed_total{device="wg0",port="lan"} 1`,
		`wgpio_neighbour_table_full_total{device="wg0",port="lan"} 7`,
		`wgpio_neighbour_table_evicted_total{device="wg0",port="lan"} 6`,
		`wgpio_neighbour_address_conflicts{device="wg0",port="lan"} 1`,
		`wgpio_neighbour_address_claims_total{device="wg0",port="lan"} 9`,
		`wgpio_neighbour_replies_total{device="wg0",port="wan"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
	want := "neighbours lan (owned address mode): 5 replies, frames dropped: not-for-us=2 op=3; table: 4 requests, 1 failed, 7 refused full, 6 evicted; 1 hosts claimed our address (9 frames)\n"
	if out := capturePrintStats(t, s); !strings.Contains(out, want) {
		t.Errorf("wgpio stats does not say %q:\n%s", want, out)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if w := `"neighbours":{"lan":{"replies":5,"drops":{"not-for-us":2,"op":3},"requests":4,"failed":1,"full":7,"evicted":6,"conflicts":1,"claims":9}`; !strings.Contains(string(b), w) {
		t.Errorf("wgpio stats -json lacks %s:\n%s", w, b)
	}
	s.Neighbours = nil
	if body := gatherText(t, newCollector("wg0", config.DefaultMetricsPeers, func() GatewayStats { return s }, func(int) ([]PeerStat, bool) { return nil, true })); strings.Contains(body, "wgpio_neighbour") {
		t.Error("neighbour metrics exported in shared mode")
	}
	if out := capturePrintStats(t, s); strings.Contains(out, "neighbours") {
		t.Errorf("wgpio stats prints neighbours in shared mode:\n%s", out)
	}
}

// TestMetricsHandshakeInvalidReasons: /metrics breaks handshake_invalid
// down by the protocol's reasons, as `wgpio stats` does (README: a
// bad_mac1 is a peer holding another public key for the gateway), and
// only by its reasons, so that they add up to it; only the total was
// exported.
func TestMetricsHandshakeInvalidReasons(t *testing.T) {
	d := &gateway.Stats{}
	d.Drops[gateway.DropHandshakeInvalid] = 5
	d.Noise.Drops[noise.DropBadMAC1] = 3
	d.Noise.Drops[noise.DropWrongSize] = 2
	d.Noise.Drops[noise.DropCookieRequired] = 1000 // answered, not invalid
	d.Noise.Drops[noise.DropUnknownPeer] = 7       // a control-plane reason of its own
	s := GatewayStats{Name: "wg0", Device: d}
	body := gatherText(t, newCollector("wg0", config.DefaultMetricsPeers, func() GatewayStats { return s }, func(int) ([]PeerStat, bool) { return nil, true }))
	for _, want := range []string{
		`wgpio_handshake_invalid_total{device="wg0",reason="bad_mac1"} 3`,
		`wgpio_handshake_invalid_total{device="wg0",reason="wrong_size"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
	sum := 0.0
	for line := range strings.Lines(body) {
		if rest, ok := strings.CutPrefix(line, "wgpio_handshake_invalid_total{"); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest[strings.LastIndexByte(rest, ' ')+1:]), 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			sum += v
		}
	}
	if sum != 5 {
		t.Errorf("wgpio_handshake_invalid_total's reasons add up to %v, want handshake_invalid's 5:\n%s", sum, body)
	}
	for _, r := range []string{"cookie_required", "unknown_peer", noise.DropReason(0).Key()} {
		if strings.Contains(body, `wgpio_handshake_invalid_total{device="wg0",reason="`+r+`"}`) {
			t.Errorf("wgpio_handshake_invalid_total has reason %s, which is not handshake_invalid's", r)
		}
	}
}

// TestMetricsHandshakesSent: /metrics exports the handshake messages and
// keepalives the gateway sent and the keepalives it received, as `wgpio
// stats` prints them: only the received handshake messages and the
// control packets of every kind together were exported, so that a peer
// that no longer answers (initiations every Rekey-Timeout for 90 s, then
// none) could not be told from one that keeps initiating to us.
func TestMetricsHandshakesSent(t *testing.T) {
	d := &gateway.Stats{InitiationsSent: 20, ResponsesSent: 3, CookieRepliesSent: 2, KeepalivesSent: 7}
	s := GatewayStats{Name: "wg0", Device: d, Queues: []fastpath.QueueStats{{KeepalivesReceived: 4}}}
	body := gatherText(t, newCollector("wg0", config.DefaultMetricsPeers, func() GatewayStats { return s }, func(int) ([]PeerStat, bool) { return nil, true }))
	for _, want := range []string{
		`wgpio_handshake_messages_sent_total{device="wg0",type="initiation"} 20`,
		`wgpio_handshake_messages_sent_total{device="wg0",type="response"} 3`,
		`wgpio_handshake_messages_sent_total{device="wg0",type="cookie_reply"} 2`,
		`wgpio_keepalives_sent_total{device="wg0"} 7`,
		`wgpio_keepalives_received_total{device="wg0",queue="0"} 4`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
}

// TestTUNDropsHelpNamesEveryReason: wgpio_tun_drops_total's help text
// says what each of its reasons means. It named four of the eight, and
// "full: the kernel's queue had no room" read as the kernel_queue_full
// exported beside it.
func TestTUNDropsHelpNamesEveryReason(t *testing.T) {
	help := newCollector("x", 0, nil, nil).tunDrops.String()
	for r := range tundev.NumTUNDropReasons {
		if !strings.Contains(help, " "+r.String()+",") && !strings.Contains(help, " "+r.String()+":") {
			t.Errorf("wgpio_tun_drops_total's help does not explain reason %q: %s", r, help)
		}
	}
}
