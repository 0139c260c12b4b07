package gateway

import (
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/protocol"
)

type macResolver [6]byte

func (r macResolver) Resolve(netip.Addr) ([6]byte, bool) { return r, true }

// syncPeerAddr is peer i's IPv4 /32 in configuration generation gen
// (198.18.0.0/15 from 198.18.4.0 for generation 0, then 10.0.0.0/8).
func syncPeerAddr(i, gen int) netip.Addr {
	if gen == 0 {
		x := uint32(198)<<24 | 18<<16 + 1024 + uint32(i)
		return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
	}
	x := uint32(10)<<24 + uint32(gen)<<20 + uint32(i)
	return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
}

func syncPeerAddr6(i, gen int) netip.Addr {
	var b [16]byte
	copy(b[:], []byte{0xfd, 0, 0x5c, 0xa1, 0, 0, 0, byte(gen)})
	binary.BigEndian.PutUint32(b[12:], uint32(i))
	return netip.AddrFrom16(b)
}

// TestSyncconfUnderTraffic: a real engine (one worker on its own thread)
// and device over memport carry traffic to a few peers with sessions while
// `wg syncconf` requests over the UAPI change every other peer of a large
// configuration (their allowed IPs move, some peers leave, new ones come,
// the stable peers are listed unchanged as syncconf lists them). Every
// packet to a stable peer arrives, sealed with that peer's key, toward its
// endpoint, in order: the workers never see a snapshot without the stable
// peers' prefixes nor one routing them elsewhere. No timing is asserted:
// traffic runs in a closed loop (a window of packets in flight) for as
// long as the requests take.
func TestSyncconfUnderTraffic(t *testing.T) {
	npeers := 100_000
	if testing.Short() || raceEnabled {
		npeers = 5_000
	}
	const stable = 8
	host, lan, far, eng, farMAC, wan4 := newMemEngine(t, "s")
	priv, _ := noise.NewPrivateKey()
	d, err := New(Options{PrivateKey: priv, ListenPort: 51820, Dataplane: eng, WANAddr4: wan4,
		Resolve: func(netip.Addr) ([6]byte, bool) { return farMAC, true }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	eng.Start()

	keys := make([]noise.PublicKey, npeers)
	for i := range keys {
		binary.LittleEndian.PutUint64(keys[i][:], uint64(i)+1)
		keys[i][31] = 0x40
	}
	// syncconf builds what `wg syncconf` sends for generation gen: every
	// peer present in it with replace_allowed_ips and its prefixes, the
	// stable ones (0..stable-1) with their endpoints and generation-0
	// prefixes; peers of the previous generation missing from this one
	// removed. Peer i is present in gen when (i+gen)%10 != 0.
	present := func(i, gen int) bool { return i < stable || (i+gen)%10 != 0 }
	syncconf := func(gen int) string {
		var b strings.Builder
		for i := range npeers {
			if !present(i, gen) {
				if gen > 0 && present(i, gen-1) {
					fmt.Fprintf(&b, "public_key=%s\nremove=true\n", keys[i].Hex())
				}
				continue
			}
			fmt.Fprintf(&b, "public_key=%s\n", keys[i].Hex())
			g := gen
			if i < stable {
				g = 0
				fmt.Fprintf(&b, "endpoint=198.18.0.2:%d\n", 40000+i)
			}
			fmt.Fprintf(&b, "replace_allowed_ips=true\nallowed_ip=%s/32\nallowed_ip=%s/128\n", syncPeerAddr(i, g), syncPeerAddr6(i, g))
		}
		return b.String()
	}
	set := func(body string) {
		t.Helper()
		if err := d.IpcSet(strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	set(syncconf(0))

	// Sessions for the stable peers: keypairs installed as a completed
	// handshake would (we are the initiator: usable at once).
	sess := make([]cipher.AEAD, stable)
	for i := range stable {
		fp := d.FastPeer(keys[i])
		var sk, rk [32]byte
		sk[0], rk[0] = byte(i)+1, byte(i)+101
		idx, err := eng.Indexes().Allocate()
		if err != nil {
			t.Fatal(err)
		}
		kp, err := fastpath.NewKeypair(&sk, &rk, idx, uint32(7000+i), true, eng.Now(), fp)
		if err != nil {
			t.Fatal(err)
		}
		fp.Current.Store(kp)
		sess[i], _ = chacha20poly1305.New(sk[:])
	}

	// The receiver: every frame on the far end must be a transport data
	// message to a stable peer's endpoint, with that peer's receiver index,
	// that opens with its key, holding an inner packet to its address with
	// the next sequence number of that peer.
	var (
		mu       sync.Mutex
		problems []string
		got      [stable]uint64 // sequence numbers received in order, per peer
		received atomic.Int64
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
		mu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rx := far.Queue(0).RX()
		frames := make([]dataplane.Frame, 64)
		for {
			n := rx.Receive(frames)
			for _, f := range frames[:n] {
				b := f.Data()
				const off = header.EthernetLen + header.IPv4MinLen + header.UDPLen
				if len(b) < off+protocol.TransportHeaderSize+protocol.TagSize || binary.LittleEndian.Uint32(b[off:]) != protocol.TypeTransport {
					fail("a frame of %d bytes on the WAN that is not transport data", len(b))
					continue
				}
				i := int(binary.LittleEndian.Uint32(b[off+4:])) - 7000
				if i < 0 || i >= stable {
					fail("transport data with receiver index %d: no stable peer's", i+7000)
					continue
				}
				if port := binary.BigEndian.Uint16(b[header.EthernetLen+header.IPv4MinLen+2:]); port != uint16(40000+i) {
					fail("peer %d's packet sent to port %d, not its endpoint's %d", i, port, 40000+i)
				}
				var nonce [12]byte
				copy(nonce[4:], b[off+8:off+16])
				inner, err := sess[i].Open(nil, nonce[:], b[off+protocol.TransportHeaderSize:], nil)
				if err != nil || len(inner) < header.IPv4MinLen+header.UDPLen+12 {
					fail("peer %d's packet does not open with its key: %v", i, err)
					continue
				}
				dst := netip.AddrFrom4([4]byte(inner[16:20]))
				pl := inner[header.IPv4MinLen+header.UDPLen:]
				pi, seq := int(binary.BigEndian.Uint32(pl)), binary.BigEndian.Uint64(pl[4:])
				if pi != i || dst != syncPeerAddr(i, 0) {
					fail("a packet for peer %d (%v) was sent to peer %d", pi, dst, i)
					continue
				}
				if seq != got[i] {
					fail("peer %d: packet %d arrived when %d was next", i, seq, got[i])
				}
				got[i] = seq + 1
			}
			rx.Free(frames[:n])
			received.Add(int64(n))
			if n == 0 {
				select {
				case <-stop:
					return
				default:
				}
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()

	// Packets accounted for: delivered, or dropped by the engine (counted
	// by reason; a drop fails the test below).
	accounted := func() int64 {
		var dropped uint64
		for _, n := range fastpath.TotalDrops(eng.Stats()) {
			dropped += n
		}
		return received.Load() + int64(dropped)
	}
	// The sender: packets round-robin over the stable peers, at most
	// window in flight, until the requests are done.
	const window = 32
	var sent atomic.Int64
	done := make(chan struct{})
	var sender sync.WaitGroup
	sender.Add(1)
	go func() {
		defer sender.Done()
		tx := host.Queue(0).TX()
		frames := make([]dataplane.Frame, 1)
		src := netip.MustParseAddr("198.19.0.10").As4()
		for seq := uint64(0); ; seq++ {
			select {
			case <-done:
				return
			default:
			}
			for sent.Load()-accounted() >= window {
				select {
				case <-done:
					return
				default:
				}
				time.Sleep(20 * time.Microsecond)
			}
			i := int(seq % stable)
			if tx.Alloc(frames) != 1 {
				time.Sleep(time.Millisecond)
				continue
			}
			f := &frames[0]
			const payload = 12
			f.SetLen(header.EthernetLen + header.IPv4MinLen + header.UDPLen + payload)
			b := f.Data()
			header.PutEthernet(b, header.MAC(lan.MAC()), header.MAC(host.MAC()), header.EtherTypeIPv4)
			ip := header.IPv4Fields{Protocol: header.ProtoUDP, Src: src, Dst: syncPeerAddr(i, 0).As4()}
			header.PutIPv4(b[header.EthernetLen:], &ip, header.UDPLen+payload)
			header.PutUDP(b[header.EthernetLen+header.IPv4MinLen:], 1000, 2000, payload)
			p := b[header.EthernetLen+header.IPv4MinLen+header.UDPLen:]
			binary.BigEndian.PutUint32(p, uint32(i))
			binary.BigEndian.PutUint64(p[4:], seq/stable)
			if tx.Transmit(frames) != 1 {
				tx.Free(frames)
				fail("host transmit refused a frame")
				continue
			}
			sent.Add(1)
		}
	}()

	// The syncconfs, while traffic flows.
	gens := 3
	for gen := 1; gen <= gens; gen++ {
		before := sent.Load()
		set(syncconf(gen))
		for sent.Load() == before { // at least one packet per generation
			time.Sleep(time.Millisecond)
		}
	}
	close(done)
	sender.Wait() // sent is final only once the sender has stopped
	// Drain: everything sent is delivered or counted as dropped. A packet
	// lost without a count would leave this waiting: after a minute
	// without progress, give up (the checks below fail).
	last, lastAt := accounted(), time.Now()
	for a := accounted(); a < sent.Load() && time.Since(lastAt) < time.Minute; a = accounted() {
		if a != last {
			last, lastAt = a, time.Now()
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()

	for _, p := range problems {
		t.Error(p)
	}
	var total uint64
	for i := range stable {
		total += got[i]
	}
	if int64(total) != sent.Load() {
		t.Errorf("%d packets delivered in order to the stable peers, %d sent", total, sent.Load())
	}
	for r, n := range fastpath.TotalDrops(eng.Stats()) {
		if n > 0 {
			t.Errorf("engine dropped %d packets (%v)", n, fastpath.DropReason(r))
		}
	}
	// The configuration is the last generation's.
	ps := d.Peers()
	want := 0
	for i := range npeers {
		if present(i, gens) {
			want++
		}
	}
	if len(ps) != want {
		t.Errorf("%d peers after the syncconfs, want %d", len(ps), want)
	}
	t.Logf("%d peers, %d syncconfs, %d packets to %d stable peers", npeers, gens, sent.Load(), stable)
}
