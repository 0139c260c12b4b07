//go:build linux

package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/protocol"
)

// simPeer is one simulated WireGuard peer on the far side of a scaleGateway
// while its handshake runs: its own static key, outer address and allowed
// IPs. It does what a real initiator does (whitepaper §5.4): a handshake
// initiation, the response consumed, and transport data sealed with the
// derived keys. Nothing of it stays once its session is confirmed.
type simPeer struct {
	i    int
	src  netip.AddrPort // outer source
	hs   *noise.Handshake
	idx  uint32 // our sender index in the initiation
	keys noise.Keys
	done chan error
}

// simPrivate is simulated peer i's static private key, derived from i (so
// that nothing per peer needs to stay in memory while the gateway's cost is
// measured). Clamped as Curve25519 keys are (RFC 7748 §5).
func simPrivate(i int) noise.PrivateKey {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(i))
	copy(seed[8:], "wgpio scale simulated peer")
	var k noise.PrivateKey
	rand.NewChaCha8(seed).Read(k[:])
	k[0] &= 248
	k[31] = k[31]&127 | 64
	return k
}

// simOuter is simulated peer i's outer address and port: 198.19.128.0/17,
// 60,000 ports per address (in-process only).
func simOuter(i int) netip.AddrPort {
	a := uint32(198)<<24 | uint32(19)<<16 | 0x8000 + uint32(i/60000)
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), uint16(1024+i%60000))
}

// simConfigs returns the gateway's configurations of n simulated peers:
// peer i with its public key (one Curve25519 operation each, on two
// goroutines), peerPrefixes(i, 0) and no endpoint (learnt from its
// handshake).
func simConfigs(n int) []gateway.PeerConfig {
	cfgs := make([]gateway.PeerConfig, n)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := w; i < n; i += 2 {
				cfgs[i] = gateway.PeerConfig{PublicKey: noise.NewStaticIdentity(simPrivate(i), nil).PublicKey(), AllowedIPs: peerPrefixes(i, 0)}
			}
		})
	}
	wg.Wait()
	return cfgs
}

// farFrames writes UDP datagrams (payloads[i] from srcs[i]) from src to the gateway's listen port on
// the Far port's TX queue 0 (the gateway's WAN receives it).
func (g *scaleGateway) farFrames(payloads [][]byte, srcs []netip.AddrPort) error {
	tx := g.Far.Queue(0).TX()
	frames := make([]dataplane.Frame, len(payloads))
	if n := tx.Alloc(frames); n != len(frames) {
		tx.Free(frames[:n])
		return fmt.Errorf("far port: %d of %d frames free", n, len(frames))
	}
	wanMAC, farMAC := header.MAC(mac6(g.WAN.MAC())), header.MAC(mac6(g.Far.MAC()))
	for i, pl := range payloads {
		n := header.EthernetLen + header.IPv4MinLen + header.UDPLen + len(pl)
		f := &frames[i]
		f.SetLen(n)
		b := f.Data()
		header.PutEthernet(b, wanMAC, farMAC, header.EtherTypeIPv4)
		ip := header.IPv4Fields{Protocol: header.ProtoUDP, Src: srcs[i].Addr().As4(), Dst: g.WAN4.As4()}
		header.PutIPv4(b[header.EthernetLen:], &ip, header.UDPLen+len(pl))
		header.PutUDP(b[header.EthernetLen+header.IPv4MinLen:], srcs[i].Port(), g.ListenPort, len(pl))
		copy(b[header.EthernetLen+header.IPv4MinLen+header.UDPLen:], pl)
	}
	for sent := 0; sent < len(frames); {
		k := tx.Transmit(frames[sent:])
		if k == 0 {
			time.Sleep(50 * time.Microsecond)
		}
		sent += k
	}
	return nil
}

// establish runs a handshake for every peer (at most window in flight, so
// that the gateway's handshake queue stays below its under-load mark and no
// cookie is asked for), and confirms each session with one keepalive
// (counter 0), after which the gateway's keypair is Current and its replay
// window made: a live, in-order session. Initiator-side Curve25519 work runs
// on two goroutines.
func (g *scaleGateway) establish(n, window int, logf func(string, ...any)) error {
	gwPub := noise.NewStaticIdentity(g.PrivateKey, nil).PublicKey()
	var mu sync.Mutex
	inFlight := make(map[uint32]*simPeer, window)
	// The reader: responses from the gateway, by our sender index.
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	rwg.Go(func() {
		rx := g.Far.Queue(0).RX()
		frames := make([]dataplane.Frame, 64)
		for {
			select {
			case <-stop:
				return
			default:
			}
			k := rx.Receive(frames)
			if k == 0 {
				time.Sleep(20 * time.Microsecond)
				continue
			}
			for _, f := range frames[:k] {
				d := f.Data()
				const off = header.EthernetLen + header.IPv4MinLen + header.UDPLen
				if len(d) < off+protocol.ResponseSize || d[off] != protocol.TypeResponse {
					continue
				}
				msg := append([]byte(nil), d[off:off+protocol.ResponseSize]...)
				mu.Lock()
				p := inFlight[binary.LittleEndian.Uint32(msg[8:])]
				mu.Unlock()
				if p != nil {
					err := p.hs.ConsumeResponse(msg)
					if err == nil {
						p.keys, err = p.hs.DeriveKeys()
					}
					p.done <- err
				}
			}
			rx.Free(frames[:k])
		}
	})
	defer func() { close(stop); rwg.Wait() }()

	start := time.Now()
	errs := make(chan error, 2)
	work := make(chan int, window)
	var wg sync.WaitGroup
	var sendMu sync.Mutex // one TX queue of the Far port
	// window goroutines, each one handshake at a time: at most window in
	// flight; the Curve25519 work spreads over the CPUs.
	for range window {
		wg.Go(func() {
			for i := range work {
				p := &simPeer{i: i, src: simOuter(i), idx: uint32(i + 1), done: make(chan error, 1)}
				mu.Lock()
				inFlight[p.idx] = p
				mu.Unlock()
				err := g.oneSession(p, gwPub, &sendMu)
				mu.Lock()
				delete(inFlight, p.idx)
				mu.Unlock()
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					for range work { // drain: stop
					}
					return
				}
			}
		})
	}
	for i := range n {
		select {
		case err := <-errs:
			close(work)
			wg.Wait()
			return err
		case work <- i:
		}
		if (i+1)%20000 == 0 {
			logf("memory: %d handshakes started in %.1f s", i+1, time.Since(start).Seconds())
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// oneSession runs peer p's handshake and confirms the session with a
// keepalive.
func (g *scaleGateway) oneSession(p *simPeer, gwPub noise.PublicKey, sendMu *sync.Mutex) error {
	id := noise.NewStaticIdentity(simPrivate(p.i), nil)
	p.hs = noise.NewHandshake(id, gwPub, noise.PresharedKey{})
	var init [protocol.InitiationSize]byte
	if err := p.hs.CreateInitiation(&init, p.idx); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		sendMu.Lock()
		err := g.farFrames([][]byte{init[:]}, []netip.AddrPort{p.src})
		sendMu.Unlock()
		if err != nil {
			return err
		}
		select {
		case err := <-p.done:
			if err != nil {
				return fmt.Errorf("peer %d: response: %w", p.i, err)
			}
			aead, err := chacha20poly1305.New(p.keys.Send[:])
			if err != nil {
				return err
			}
			ka := make([]byte, protocol.TransportHeaderSize, protocol.KeepaliveSize)
			noise.PutTransportHeader(ka, p.keys.RemoteIndex, 0)
			var nonce [noise.TransportNonceSize]byte
			noise.PutNonce(&nonce, 0)
			ka = aead.Seal(ka, nonce[:], nil, nil)
			p.keys.Zero()
			sendMu.Lock()
			err = g.farFrames([][]byte{ka}, []netip.AddrPort{p.src})
			sendMu.Unlock()
			return err
		case <-time.After(10 * time.Second):
			if attempt == 2 {
				return fmt.Errorf("peer %d: no handshake response after 3 initiations", p.i)
			}
			// The same initiation again: the gateway drops a replayed
			// timestamp only once it consumed it, so a lost one is retried.
		}
	}
}
