package gateway

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
)

// indexAccount checks that every receiver index allocated in the index
// table is accounted for: an initiation of ours in flight (pending) or a
// keypair a peer owns (published under it, not dead). It returns the
// number of allocated indexes. The device stands still meanwhile.
func indexAccount(t *testing.T, d *Device, idx *fastpath.IndexTable) int {
	t.Helper()
	d.mu.RLock()
	defer d.mu.RUnlock()
	d.pendMu.Lock()
	pending := len(d.pending)
	for i, p := range d.pending {
		if d.byFP[p.fp] != p {
			t.Errorf("pending index %#x of a peer no longer configured", i)
		}
	}
	d.pendMu.Unlock()
	owned := 0
	for p := range d.peers.All {
		p.mu.Lock()
		for _, o := range p.owned {
			owned++
			if idx.Lookup(o.kp.LocalIndex) != o.kp || o.kp.Dead() {
				t.Errorf("peer %s owns keypair %#x not published (or dead)", p.pub, o.kp.LocalIndex)
			}
		}
		if p.hasPending && d.pending[p.pendingIndex] != p {
			t.Errorf("peer %s: pending index %#x not registered", p.pub, p.pendingIndex)
		}
		p.mu.Unlock()
	}
	if n := idx.Len(); n != pending+owned {
		t.Errorf("index table holds %d indexes; %d initiations in flight and %d keypairs owned account for %d",
			n, pending, owned, pending+owned)
	}
	return idx.Len()
}

// TestIndexesAccountedAfterStorm: initiations of ours and their responses,
// the peers' own initiations, peers removed and added back and the
// private key changed and back, all at once on two handshake workers, the
// tick and the UAPI: afterwards every allocated receiver index is an
// initiation in flight or a keypair a configured peer owns (nothing
// leaked), and Close frees them all.
func TestIndexesAccountedAfterStorm(t *testing.T) {
	const n = 12
	r := newLightRig(t, n, 2)
	r.f.viaChannel = true
	ourPub := r.our.PublicKey()
	type responder struct {
		id *noise.StaticIdentity
		hs *noise.Handshake
	}
	resp := make(map[netip.AddrPort]*responder, n)
	cs := make([]PeerConfig, n)
	for i, s := range r.sims {
		id := noise.NewStaticIdentity(s.key, nil)
		resp[s.src] = &responder{id: id, hs: noise.NewHandshake(id, ourPub, noise.PresharedKey{})}
		cs[i] = PeerConfig{PublicKey: s.pub, Endpoint: s.src}
	}
	if err := r.dev.AddPeers(cs); err != nil {
		t.Fatal(err)
	}
	if err := r.dev.Start(); err != nil {
		t.Fatal(err)
	}
	rounds := 300
	if testing.Short() {
		rounds = 100
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // the peers answer our initiations
		defer wg.Done()
		seen := 0
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
			sent := r.f.sentSince(seen)
			seen += len(sent)
			for _, p := range sent {
				if p.typ != noise.TypeInitiation {
					continue
				}
				s := resp[p.dst]
				if s == nil {
					continue
				}
				h, err := s.id.ConsumeInitiation(p.payload, func(k noise.PublicKey) *noise.Handshake {
					if k == ourPub {
						return s.hs
					}
					return nil
				})
				if err != nil {
					continue
				}
				var m [noise.ResponseSize]byte
				if h.CreateResponse(&m, rand.Uint32()) != nil {
					continue
				}
				h.DeriveKeys()
				r.f.hs <- fastpath.HandshakeMessage{Src: p.dst, Dst: netip.MustParseAddrPort("198.18.0.1:51820"), Data: m[:]}
			}
		}
	}()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range rounds {
		s := r.sims[rng.IntN(n)]
		switch k := rng.IntN(10); {
		case k < 4: // data waiting: an initiation of ours
			if fp := r.dev.FastPeer(s.pub); fp != nil {
				fp.HandshakeNeeded.Store(true)
			}
		case k < 7: // the peer initiates
			r.f.hs <- s.message(s.initiation(t, rng.Uint32()))
		case k < 9: // removed and added back
			r.dev.RemovePeer(s.pub)
			if err := r.dev.AddPeer(PeerConfig{PublicKey: s.pub, Endpoint: s.src}); err != nil {
				t.Fatal(err)
			}
		default: // the private key changes and comes back
			other, _ := noise.NewPrivateKey()
			r.dev.SetPrivateKey(other)
			r.dev.SetPrivateKey(r.our)
		}
		r.f.clock.Add(int64(300 * time.Millisecond))
		r.dev.Tick(r.now())
		if i%4 == 0 {
			time.Sleep(200 * time.Microsecond)
		}
	}
	waitFor(t, func() bool {
		return len(r.f.hs) == 0 && r.dev.Stats().HandshakeBacklog == 0 && r.dev.pool.backlog() == 0
	})
	close(stop)
	wg.Wait()
	waitFor(t, func() bool { return len(r.f.hs) == 0 && r.dev.Stats().HandshakeBacklog == 0 })
	// Two ticks: a keypair a rotation pushed out is freed at the second
	// sweep.
	for range 2 {
		r.f.clock.Add(int64(DefaultTickInterval))
		r.dev.Tick(r.now())
	}
	// Every handshake worker and the tick hold idMu for reading while
	// they work: with it held for writing the device stands still.
	r.dev.idMu.Lock()
	indexAccount(t, r.dev, &r.f.idx)
	r.dev.idMu.Unlock()
	if st := r.dev.Stats(); st.KeypairsInstalledTotal == 0 || st.InitiationsSent == 0 {
		t.Errorf("the storm made %d keypairs from %d initiations of ours: it did not run", st.KeypairsInstalledTotal, st.InitiationsSent)
	}
	r.dev.Close() // stops the workers; removes every peer
	if got := r.f.idx.Len(); got != 0 {
		t.Errorf("index table after Close: %d entries, want 0", got)
	}
	st := r.dev.Stats()
	t.Logf("initiations %d, responses %d, keypairs %d, drops %v", st.InitiationsSent, st.ResponsesSent, st.KeypairsInstalledTotal, st.Losses())
}
