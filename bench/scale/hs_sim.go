//go:build linux

package main

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"runtime"
	"sync"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/noise"
)

// The handshake part's simulated peers: real initiators on package noise,
// one static key each, reaching the gateway's WAN port over memport from
// an address of their own.

// hsPeer is one simulated WireGuard peer.
type hsPeer struct {
	i    int
	pub  noise.PublicKey
	hs   *noise.Handshake
	src  netip.AddrPort
	tmpl header.UDPTemplate

	// The timers' state, owned by the loop that drives the peer.
	attempts    int
	established bool
	keys        noise.Keys
}

// hsIndex is the sender index of peer i's attempt: the peer is found
// again from the receiver index of what the gateway sends back.
func hsIndex(i, attempt int) uint32 { return uint32(i+1)<<8 | uint32(attempt&0xff) }

// hsOf returns the peer index an index of hsIndex names.
func hsOf(idx uint32) int { return int(idx>>8) - 1 }

// hsSource is peer i's outer address: 198.18.128.0/17, then other ports.
func hsSource(i int) netip.AddrPort {
	a := netip.AddrFrom4([4]byte{198, 18, byte(128 + (i>>8)%128), byte(i)})
	return netip.AddrPortFrom(a, uint16(40000+i/(1<<15)))
}

// newHSPeers makes n peers toward the gateway whose public key is gw, in
// parallel (each costs two Curve25519 operations).
func newHSPeers(n int, gw noise.PublicKey, wanMAC, farMAC [6]byte) ([]*hsPeer, error) {
	out := make([]*hsPeer, n)
	errs := make([]error, n)
	hsParallel(n, func(i int) {
		k, err := noise.NewPrivateKey()
		if err != nil {
			errs[i] = err
			return
		}
		s := &hsPeer{i: i, pub: k.PublicKey(), src: hsSource(i)}
		s.hs = noise.NewHandshake(noise.NewStaticIdentity(k, nil), gw, noise.PresharedKey{})
		k.Zero()
		var ok bool
		s.tmpl, ok = header.NewUDPTemplate(header.UDPTemplateConfig{Dst: wanMAC, Src: farMAC, VLANID: -1,
			SrcAddr: s.src.Addr(), DstAddr: gwWAN4, DstPort: gwListen})
		if !ok {
			errs[i] = errors.New("udp template")
			return
		}
		out[i] = s
	})
	return out, errors.Join(errs...)
}

// hsParallel runs fn(0..n-1) on every CPU.
func hsParallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	var next sync.Mutex
	i := 0
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				j := i
				i++
				next.Unlock()
				if j >= n {
					return
				}
				fn(j)
			}
		}()
	}
	wg.Wait()
}

// peerConfigs are the gateway's configuration of the simulated peers.
func hsConfigs(sims []*hsPeer) []gateway.PeerConfig {
	out := make([]gateway.PeerConfig, len(sims))
	for i, s := range sims {
		out[i] = gateway.PeerConfig{PublicKey: s.pub, AllowedIPs: peerPrefixes(i, 0)[:1]}
	}
	return out
}

// frame wraps a WireGuard message in the peer's Ethernet/IPv4/UDP headers.
func (s *hsPeer) frame(msg []byte) []byte {
	n := s.tmpl.Len()
	b := make([]byte, n+len(msg))
	copy(b[n:], msg)
	s.tmpl.Put(b, s.src.Port(), len(msg))
	return b
}

// initiation makes a fresh initiation (two Curve25519 operations), with
// MAC2 when the gateway gave the peer a cookie, as a frame.
func (s *hsPeer) initiation() ([]byte, error) {
	var msg [noise.InitiationSize]byte
	if err := s.hs.CreateInitiation(&msg, hsIndex(s.i, s.attempts)); err != nil {
		return nil, err
	}
	s.attempts++
	return s.frame(msg[:]), nil
}

// hsFar owns queue 0 of the far side of the WAN link.
type hsFar struct {
	tx  dataplane.TX
	rx  dataplane.RX
	one [1]dataplane.Frame
	in  [64]dataplane.Frame
}

func newHSFar(g *scaleGateway) *hsFar {
	q := g.Far.Queue(0)
	return &hsFar{tx: q.TX(), rx: q.RX()}
}

// send transmits one frame (a copy); false when the ring or pool is full.
func (f *hsFar) send(b []byte) bool { return dataplane.SendCopy(f.tx, f.one[:], b) == nil }

// receive hands each WireGuard message the gateway sent (its UDP payload)
// to fn and frees the frames; it returns how many frames it took.
func (f *hsFar) receive(fn func(msg []byte)) int {
	n := f.rx.Receive(f.in[:])
	for i := range n {
		if msg := hsUDPPayload(f.in[i].Data()); msg != nil {
			fn(msg)
		}
	}
	f.rx.Free(f.in[:n])
	clear(f.in[:n])
	return n
}

// hsUDPPayload returns the UDP payload of an untagged Ethernet/IPv4/UDP
// frame, nil for anything else.
func hsUDPPayload(b []byte) []byte {
	if len(b) < 14+20+8 || binary.BigEndian.Uint16(b[12:]) != 0x0800 {
		return nil
	}
	ip := b[14:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[9] != 17 || len(ip) < ihl+8 {
		return nil
	}
	return ip[ihl+8:]
}

// hsReceiver returns the receiver index of a response, cookie reply or
// transport message (types 2–4).
func hsReceiver(msg []byte) (uint32, bool) {
	if len(msg) < 16 {
		return 0, false
	}
	switch msg[0] {
	case noise.TypeResponse:
		return binary.LittleEndian.Uint32(msg[noise.ResponseOffsetReceiver:]), true
	case noise.TypeCookieReply:
		return binary.LittleEndian.Uint32(msg[noise.CookieReplyOffsetReceiver:]), true
	case noise.TypeTransport:
		r, _, ok := noise.ParseTransportHeader(msg)
		return r, ok
	}
	return 0, false
}

// confirm sends the peer's first transport message (an empty one, a
// keepalive) on its new session, so that the gateway, the responder,
// promotes the session to Current (whitepaper §5.4.6).
func (s *hsPeer) confirm(f *hsFar) error {
	kp, err := fastpath.NewKeypair(&s.keys.Send, &s.keys.Receive, s.keys.LocalIndex, s.keys.RemoteIndex, true, 1, nil)
	if err != nil {
		return err
	}
	var buf [noise.KeepaliveSize]byte
	noise.PutTransportHeader(buf[:], kp.RemoteIndex, 0)
	out := kp.Seal(buf[:noise.TransportHeaderSize], nil, 0)
	kp.Zero()
	if !f.send(s.frame(out)) {
		return errors.New("far ring full")
	}
	return nil
}
