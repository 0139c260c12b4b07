package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/noise"
)

// memberDP is a fakeDP that keeps the dataplane's peer set apart and
// counts the control packets posted for a peer not in it (strays): the
// engine indexes its per-queue state by Peer.ID, which only its
// UpdatePeers assigns, so a peer it has not taken reaches another
// peer's state (ID 0's) under an ID it then writes behind its workers'
// backs.
type memberDP struct {
	*fakeDP
	mu     sync.Mutex
	in     map[*fastpath.Peer]bool
	strays atomic.Int64
	err    error // UpdatePeers' error, the change taken (a full LAN map's)
}

func (m *memberDP) UpdatePeers(c fastpath.PeerChange) error {
	m.mu.Lock()
	for _, p := range c.Remove {
		delete(m.in, p)
	}
	for _, p := range c.Add {
		m.in[p] = true
	}
	m.mu.Unlock()
	if err := m.fakeDP.UpdatePeers(c); err != nil {
		return err
	}
	return m.err
}

func (m *memberDP) member(p *fastpath.Peer) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.in[p]
}

func (m *memberDP) Send(queue int, pkt fastpath.ControlPacket) bool {
	if pkt.Peer != nil && !m.member(pkt.Peer) {
		m.strays.Add(1)
	}
	return m.fakeDP.Send(queue, pkt)
}

func (m *memberDP) SendWait(queue int, pkt fastpath.ControlPacket, timeout time.Duration) bool {
	if pkt.Peer != nil && !m.member(pkt.Peer) {
		m.strays.Add(1)
	}
	return m.fakeDP.SendWait(queue, pkt, timeout)
}

// TestSetBatchPeersJoinAtOnce: a set request of the UAPI socket is
// applied in batches (ipcSetConn), the device's lock released between
// them, and its routes published at its end; a peer an earlier batch
// created whose handshake completes between two batches (its initiation
// answered, its keypair installed and posted) is in the dataplane's set
// by then, with its ID: before, the response was posted for a peer the
// engine had not taken (ID 0 unassigned: ID 0's per-queue state, another
// peer's), and the ID written when the set ended, behind the workers.
// The peer works once the set has answered, its session kept.
func TestSetBatchPeersJoinAtOnce(t *testing.T) {
	our, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	m := &memberDP{fakeDP: newFakeDP(t), in: make(map[*fastpath.Peer]bool)}
	d, err := New(Options{PrivateKey: our, Dataplane: m, HandshakeWorkers: 1, WANAddr4: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// A peer published before, which holds ID 0.
	var first noise.PublicKey
	first[0], first[31] = 1, 0x40
	if err := d.AddPeer(PeerConfig{PublicKey: first, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.255.0/24")}}); err != nil {
		t.Fatal(err)
	}

	s, client, fp := setHalfway(t, d, our)
	d.HandleMessage(s.message(s.initiation(t, 7)))
	if got := len(ofType(m.sentSince(0), noise.TypeResponse, 0)); got != 1 {
		t.Fatalf("responses to s's initiation between the batches: %d, want 1", got)
	}
	if n := m.strays.Load(); n != 0 {
		t.Errorf("%d control packets posted for a peer not in the dataplane's set (ID %d), want 0", n, fp.ID)
	}
	if !m.member(fp) {
		t.Errorf("s is not in the dataplane's set between the batches, its handshake done")
	}

	endSet(t, client)
	if !m.member(fp) {
		t.Fatal("s is not in the dataplane's set after the set")
	}
	if fp.Next.Load() == nil {
		t.Error("s's session (its responder keypair) is gone after the set")
	}
	m.mu.Lock()
	owner := m.routes[netip.MustParsePrefix("198.19.0.1/32")]
	m.mu.Unlock()
	if owner != fp {
		t.Errorf("198.19.0.1/32 routed to %p after the set, want s's peer %p", owner, fp)
	}
}

// TestSetBatchFullMapLoggedOnce: a set of several batches over a
// dataplane whose LAN map is full (every change reports ENOSPC while
// prefixes wait for a slot) logs it once, for the whole request, and
// answers errno ENOSPC: the peers each batch hands the dataplane
// (joinCreatedLocked) do not log it again.
func TestSetBatchFullMapLoggedOnce(t *testing.T) {
	m := &memberDP{fakeDP: newFakeDP(t), in: make(map[*fastpath.Peer]bool),
		err: fmt.Errorf("the LAN XDP prefix map is full: %w", syscall.ENOSPC)}
	var logs bytes.Buffer
	d, err := New(Options{Dataplane: m, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var b strings.Builder
	b.WriteString("set=1\n")
	peers := 0
	for ; b.Len() < 3*uapiBatchBytes; peers++ {
		var k noise.PublicKey
		k[0], k[1], k[31] = byte(peers), byte(peers>>8), 0x41
		fmt.Fprintf(&b, "public_key=%s\nallowed_ip=10.%d.%d.0/24\n", k.Hex(), byte(peers>>8), byte(peers))
	}
	b.WriteString("\n")
	client, server := net.Pipe()
	defer client.Close()
	go d.ServeUAPI(server)
	go client.Write([]byte(b.String()))
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	reply, err := bufio.NewReader(client).ReadString('\n')
	if want := fmt.Sprintf("errno=%d\n", -int(syscall.ENOSPC)); err != nil || reply != want {
		t.Fatalf("set reply %q, %v; want %q", reply, err, want)
	}
	if n := strings.Count(logs.String(), "did not take the whole configuration"); n != 1 {
		t.Errorf("the full map logged %d times for one set, want once:\n%s", n, logs.String())
	}
	m.mu.Lock()
	in := len(m.in)
	m.mu.Unlock()
	if in != peers {
		t.Errorf("%d peers in the dataplane's set after the set, want %d", in, peers)
	}
}

// TestSetBatchHandshakeEngine is TestSetBatchPeersJoinAtOnce over the
// engine (memport, its worker running), for the race detector: the
// worker that posts the response between two batches reads the peer's
// ID (its per-queue state), which the engine wrote when the peer joined,
// before the lock was released. Before, it wrote it at the set's end,
// under -race: "DATA RACE ... assignIDLocked ... Previous read ...
// worker.met ... sendControl". The response leaves on the WAN, and the
// set is answered.
func TestSetBatchHandshakeEngine(t *testing.T) {
	_, _, far, eng, farMAC, wan4 := newMemEngine(t, "b")
	our, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{PrivateKey: our, ListenPort: 51820, Dataplane: eng, WANAddr4: wan4,
		Resolve: func(netip.Addr) ([6]byte, bool) { return farMAC, true }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	eng.Start()
	var first noise.PublicKey // ID 0
	first[0], first[31] = 1, 0x40
	if err := d.AddPeer(PeerConfig{PublicKey: first, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.254.0/24")}}); err != nil {
		t.Fatal(err)
	}
	s, client, _ := setHalfway(t, d, our)
	deadline := time.Now().Add(10 * time.Second)
	d.HandleMessage(s.message(s.initiation(t, 7)))
	// The worker posts the response meanwhile, with nothing that orders
	// it before the set's end for the race detector (waiting for the
	// frame here would).
	time.Sleep(50 * time.Millisecond)
	endSet(t, client)
	// The response left on the WAN.
	rx := far.Queue(0).RX()
	frames := make([]dataplane.Frame, 8)
	const off = header.EthernetLen + header.IPv4MinLen + header.UDPLen
	for got := false; !got; {
		if time.Now().After(deadline) {
			t.Fatal("no handshake response on the WAN within 10 s")
		}
		n := rx.Receive(frames)
		for _, f := range frames[:n] {
			if b := f.Data(); len(b) > off && b[off] == noise.TypeResponse {
				got = true
			}
		}
		rx.Free(frames[:n])
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

// setHalfway starts a set request on d's UAPI (the client's end returned,
// closed when the test ends) that creates a simulated peer s (allowed IP
// 198.19.0.1/32) first, then other peers past the first batch
// (uapiBatchBytes) and a part of the second one, and returns once the
// first batch is applied and the lock released (s known, its fast-path
// peer fp): the request stops there, its end not sent, while s
// handshakes.
func setHalfway(t *testing.T, d *Device, our noise.PrivateKey) (s *simPeer, client net.Conn, fp *fastpath.Peer) {
	t.Helper()
	s = &simPeer{src: netip.MustParseAddrPort("198.18.9.9:51820")}
	var err error
	if s.key, err = noise.NewPrivateKey(); err != nil {
		t.Fatal(err)
	}
	s.pub = s.key.PublicKey()
	s.hs = noise.NewHandshake(noise.NewStaticIdentity(s.key, nil), our.PublicKey(), noise.PresharedKey{})
	var b strings.Builder
	b.WriteString("set=1\n")
	fmt.Fprintf(&b, "public_key=%s\nallowed_ip=198.19.0.1/32\n", s.pub.Hex())
	for i := 0; b.Len() < uapiBatchBytes+uapiBatchBytes/4; i++ {
		var k noise.PublicKey
		k[0], k[1], k[2], k[31] = byte(i), byte(i>>8), 2, 0x40
		fmt.Fprintf(&b, "public_key=%s\nallowed_ip=10.%d.%d.0/24\n", k.Hex(), byte(i>>8), byte(i))
	}
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close() })
	go d.ServeUAPI(server)
	if _, err := client.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for fp = d.FastPeer(s.pub); fp == nil; fp = d.FastPeer(s.pub) {
		if time.Now().After(deadline) {
			t.Fatal("the first batch of the set was not applied within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	return s, client, fp
}

// newMemEngine is a fast-path engine on memport (name: a prefix of the
// ports' names), not started, for a Device's Dataplane: its LAN port
// (lan) faces host, its WAN port far, whose MAC the engine resolves every
// outer next hop to (farMAC), and its WAN address is wan4. Everything is
// closed when the test ends.
func newMemEngine(t *testing.T, name string) (host, lan, far *memport.Port, eng *fastpath.Engine, farMAC [6]byte, wan4 netip.Addr) {
	t.Helper()
	host, lan, err := memport.NewPair(memport.Config{Name: name + "h", MACA: net.HardwareAddr{2, 0, 0, 0, 9, 1}, MACB: net.HardwareAddr{2, 0, 0, 0, 9, 2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(); lan.Close() })
	wan, far, err := memport.NewPair(memport.Config{Name: name + "w", MACA: net.HardwareAddr{2, 0, 0, 0, 9, 3}, MACB: net.HardwareAddr{2, 0, 0, 0, 9, 4}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wan.Close(); far.Close() })
	var hostMAC [6]byte
	copy(farMAC[:], far.MAC())
	copy(hostMAC[:], host.MAC())
	wan4 = netip.MustParseAddr("198.18.0.1")
	eng, err = fastpath.New(fastpath.Config{LAN: lan, WAN: wan, ListenPort: 51820, WANAddr4: wan4,
		LANAddr4: netip.MustParseAddr("198.19.255.254"), WANResolver: macResolver(farMAC), LANResolver: macResolver(hostMAC)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return host, lan, far, eng, farMAC, wan4
}

// endSet sends the end of setHalfway's request (the empty line) and
// fails the test unless the set answers errno=0 within 10 s.
func endSet(t *testing.T, client net.Conn) {
	t.Helper()
	if _, err := client.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	reply, err := bufio.NewReader(client).ReadString('\n')
	if err != nil || reply != "errno=0\n" {
		t.Fatalf("set reply %q, %v; want errno=0", reply, err)
	}
}
