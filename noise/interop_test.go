package noise_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/noise"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"
)

func newIdentity(t testing.TB) *noise.StaticIdentity {
	t.Helper()
	k, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return noise.NewStaticIdentity(k, nil)
}

func pskCases(t *testing.T) []struct {
	name string
	psk  noise.PresharedKey
} {
	psk, err := noise.NewPresharedKey()
	if err != nil {
		t.Fatal(err)
	}
	return []struct {
		name string
		psk  noise.PresharedKey
	}{{"no psk", noise.PresharedKey{}}, {"psk", psk}}
}

// respond runs our responder on an initiation from wg: Check, Consume,
// CreateResponse, send, DeriveKeys.
func respond(t *testing.T, id *noise.StaticIdentity, hs *noise.Handshake, w *wgPeer, init []byte, index uint32) noise.Keys {
	t.Helper()
	if v, err := id.CookieChecker().Check(init, wgSource, false); v != noise.VerdictAccept {
		t.Fatalf("Check(initiation) = %v, %v, want accept", v, err)
	}
	h, err := id.ConsumeInitiation(init, func(pk noise.PublicKey) *noise.Handshake {
		if pk == w.pub {
			return hs
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ConsumeInitiation(wireguard-go's initiation) = %v", err)
	}
	if h != hs {
		t.Fatalf("ConsumeInitiation returned handshake %p, want %p", h, hs)
	}
	var resp [noise.ResponseSize]byte
	if err := h.CreateResponse(&resp, index); err != nil {
		t.Fatalf("CreateResponse: %v", err)
	}
	w.send(t, resp[:])
	keys, err := h.DeriveKeys()
	if err != nil {
		t.Fatalf("DeriveKeys: %v", err)
	}
	if keys.IsInitiator || keys.LocalIndex != index {
		t.Fatalf("keys: initiator %v, local index %#x; want false, %#x", keys.IsInitiator, keys.LocalIndex, index)
	}
	return keys
}

// TestInteropWireGuardGoInitiator: stock wireguard-go initiates, we respond;
// then transport data both ways, decrypted on each side.
func TestInteropWireGuardGoInitiator(t *testing.T) {
	for _, tc := range pskCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			id := newIdentity(t)
			w := newWGPeer(t, id.PublicKey(), tc.psk)
			hs := noise.NewHandshake(id, w.pub, tc.psk)

			ping := tuntest.Ping(ourAddr, wgAddr)
			w.tun.Outbound <- ping // makes wireguard-go initiate
			init := w.recv(t, noise.TypeInitiation, 5*time.Second)
			keys := respond(t, id, hs, w, init, 0x1234abcd)

			// wireguard-go sends the packet it held, with counter 0.
			data := w.recv(t, noise.TypeTransport, 5*time.Second)
			recv, ctr, plain := open(t, keys.Receive, data)
			if recv != keys.LocalIndex || ctr != 0 {
				t.Errorf("transport header = receiver %#x counter %d, want %#x 0", recv, ctr, keys.LocalIndex)
			}
			if got := ipPacket(t, plain); !bytes.Equal(got, ping) {
				t.Errorf("plaintext from wireguard-go = % x, want % x", got, ping)
			}

			// Our transport data must come out of its TUN.
			back := tuntest.Ping(wgAddr, ourAddr)
			w.send(t, seal(t, keys.Send, keys.RemoteIndex, 0, back))
			if got := w.fromTUN(t); !bytes.Equal(got, back) {
				t.Errorf("wireguard-go TUN got % x, want % x", got, back)
			}
			if s := id.Stats().Snapshot(); s.InitiationsConsumed != 1 || s.ResponsesCreated != 1 {
				t.Errorf("stats = %+v, want 1 initiation consumed, 1 response created", s)
			}
		})
	}
}

// TestInteropWireGuardGoResponder: we initiate, stock wireguard-go responds;
// then transport data both ways.
func TestInteropWireGuardGoResponder(t *testing.T) {
	for _, tc := range pskCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			id := newIdentity(t)
			w := newWGPeer(t, id.PublicKey(), tc.psk)
			hs := noise.NewHandshake(id, w.pub, tc.psk)

			var init [noise.InitiationSize]byte
			const index = 0x0badcafe
			if err := hs.CreateInitiation(&init, index); err != nil {
				t.Fatalf("CreateInitiation: %v", err)
			}
			w.send(t, init[:])
			resp := w.recv(t, noise.TypeResponse, 5*time.Second)
			if err := hs.ConsumeResponse(resp); err != nil {
				t.Fatalf("ConsumeResponse(wireguard-go's response) = %v", err)
			}
			keys, err := hs.DeriveKeys()
			if err != nil {
				t.Fatalf("DeriveKeys: %v", err)
			}
			if !keys.IsInitiator || keys.LocalIndex != index {
				t.Fatalf("keys: initiator %v, local index %#x; want true, %#x", keys.IsInitiator, keys.LocalIndex, index)
			}
			// Replaying the response must fail now.
			if err := hs.ConsumeResponse(resp); err != noise.DropUnexpectedState {
				t.Errorf("ConsumeResponse(replayed response) = %v, want %v", err, noise.DropUnexpectedState)
			}

			ping := tuntest.Ping(wgAddr, ourAddr)
			w.send(t, seal(t, keys.Send, keys.RemoteIndex, 0, ping))
			if got := w.fromTUN(t); !bytes.Equal(got, ping) {
				t.Errorf("wireguard-go TUN got % x, want % x", got, ping)
			}

			back := tuntest.Ping(ourAddr, wgAddr)
			w.tun.Outbound <- back
			data := w.recv(t, noise.TypeTransport, 5*time.Second)
			recv, ctr, plain := open(t, keys.Receive, data)
			if recv != index || ctr != 0 {
				t.Errorf("transport header = receiver %#x counter %d, want %#x 0", recv, ctr, index)
			}
			if got := ipPacket(t, plain); !bytes.Equal(got, back) {
				t.Errorf("plaintext from wireguard-go = % x, want % x", got, back)
			}
		})
	}
}

// TestInteropCookie: our responder under load answers stock wireguard-go's
// initiation with a cookie reply; wireguard-go consumes it and its next
// initiation carries a MAC2 we accept, bound to its source address and port.
func TestInteropCookie(t *testing.T) {
	id := newIdentity(t)
	w := newWGPeer(t, id.PublicKey(), noise.PresharedKey{})
	hs := noise.NewHandshake(id, w.pub, noise.PresharedKey{})
	cc := id.CookieChecker()

	ping := tuntest.Ping(ourAddr, wgAddr)
	w.tun.Outbound <- ping
	init := w.recv(t, noise.TypeInitiation, 5*time.Second)
	if v, err := cc.Check(init, wgSource, true); v != noise.VerdictCookie || err != noise.DropCookieRequired {
		t.Fatalf("Check(first initiation, under load) = %v, %v; want cookie", v, err)
	}
	curveBefore := id.Stats().Curve25519Operations()
	var reply [noise.CookieReplySize]byte
	if err := cc.CreateReply(&reply, init, wgSource); err != nil {
		t.Fatalf("CreateReply: %v", err)
	}
	if got := id.Stats().Curve25519Operations(); got != curveBefore {
		t.Errorf("Curve25519 operations for a cookie reply = %d, want 0", got-curveBefore)
	}
	w.send(t, reply[:])

	// wireguard-go resends after RekeyTimeout (5 s, plus jitter). To go
	// sooner we use its own exported knob: ExpireCurrentKeypairs resets its
	// handshake rate limit (not the cookie), then SendHandshakeInitiation.
	// The cookie reply is consumed asynchronously by its handshake worker,
	// so an initiation may still lack MAC2: answer it with a cookie again and
	// retry.
	peer := w.dev.LookupPeer(device.NoisePublicKey(id.PublicKey()))
	var next []byte
	for attempt := 0; ; attempt++ {
		if attempt == 50 {
			t.Fatal("wireguard-go never sent an initiation with a valid MAC2")
		}
		time.Sleep(50 * time.Millisecond)
		peer.ExpireCurrentKeypairs()
		if err := peer.SendHandshakeInitiation(false); err != nil {
			t.Fatalf("SendHandshakeInitiation: %v", err)
		}
		next = w.recv(t, noise.TypeInitiation, 5*time.Second)
		v, _ := cc.Check(next, wgSource, true)
		if v == noise.VerdictAccept {
			break
		}
		if err := cc.CreateReply(&reply, next, wgSource); err != nil {
			t.Fatal(err)
		}
		w.send(t, reply[:])
	}
	// The cookie is bound to the source address and port.
	other := netip.AddrPortFrom(wgSource.Addr(), wgSource.Port()+1)
	if v, _ := cc.Check(next, other, true); v != noise.VerdictCookie {
		t.Errorf("Check(initiation with MAC2, other source port) = %v, want cookie", v)
	}
	if cc.CheckMAC2(next, netip.MustParseAddrPort("198.18.1.2:51820")) {
		t.Errorf("CheckMAC2(initiation, other source address) = true, want false")
	}
	// Drain initiations that crossed with our last reply.
	keys := respond(t, id, hs, w, next, 7)
	data := w.recv(t, noise.TypeTransport, 5*time.Second)
	_, _, plain := open(t, keys.Receive, data)
	if got := ipPacket(t, plain); !bytes.Equal(got, ping) {
		t.Errorf("plaintext from wireguard-go = % x, want % x", got, ping)
	}
}

// TestInteropPresharedKeyMismatch: stock wireguard-go configured with
// another pre-shared key answers our initiation (the psk enters only at the
// response) and we refuse its response.
func TestInteropPresharedKeyMismatch(t *testing.T) {
	id := newIdentity(t)
	theirs, _ := noise.NewPresharedKey()
	w := newWGPeer(t, id.PublicKey(), theirs)
	hs := noise.NewHandshake(id, w.pub, noise.PresharedKey{})
	var init [noise.InitiationSize]byte
	if err := hs.CreateInitiation(&init, 1); err != nil {
		t.Fatal(err)
	}
	w.send(t, init[:])
	resp := w.recv(t, noise.TypeResponse, 5*time.Second)
	if err := hs.ConsumeResponse(resp); err != noise.DropDecryptFailed {
		t.Errorf("ConsumeResponse(response under another psk) = %v, want %v", err, noise.DropDecryptFailed)
	}
}
