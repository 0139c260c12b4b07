package gateway

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/protocol"
)

// wgMAC is the source MAC of the peer's handshake messages in these tests:
// the endpoint they set is then complete (a next hop's MAC known).
var wgMAC = [6]byte{2, 0, 0, 0, 0, 2}

// The protocol-conformance tests: rules of whitepaper §6 where wgpio once
// did what neither wireguard-go nor the kernel does, each checked against
// the behaviour of wireguard-go (device/send.go, device/timers.go).

// TestResponseCountsAgainstRekeyTimeout: a responder with data waiting when
// it answers an initiation does not start a crossing handshake of its own
// (whitepaper §6.1: a handshake message at most once per RekeyTimeout;
// wireguard-go's SendHandshakeResponse records the response as the last
// handshake sent). The data goes once the initiator's first message
// promotes the responder's keypair; only if none came within RekeyTimeout
// does the responder initiate.
func TestResponseCountsAgainstRekeyTimeout(t *testing.T) {
	src := netip.MustParseAddrPort("198.18.0.2:51820")
	for _, promoted := range []bool{true, false} {
		name := "initiator's data lost"
		if promoted {
			name = "initiator's data arrives"
		}
		t.Run(name, func(t *testing.T) {
			r := newRig(t, rigOptions{})
			fp := r.fp()
			r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, SrcMAC: wgMAC, Data: r.wgInitiation(t)})
			next := fp.Next.Load()
			if next == nil || len(ofType(r.f.sentSince(0), noise.TypeResponse, 0)) != 1 {
				t.Fatalf("no response and Next keypair after an initiation; sent %v", types(r.f.sentSince(0)))
			}
			t0 := r.now()
			// Data for the peer while the responder's keypair is not yet
			// usable: the workers hold it and ask for a handshake.
			if r.f.sendData(fp, ourPacket(1)) {
				t.Fatal("sendData before promotion = true, want false (held)")
			}
			r.advance(50 * time.Millisecond)
			if n := len(ofType(r.f.sentSince(0), noise.TypeInitiation, 0)); n != 0 {
				t.Fatalf("initiations right after our response = %d, want 0 (RekeyTimeout since the response); sent %v", n, types(r.f.sentSince(0)))
			}
			if promoted {
				fp.Promote(next) // the initiator's first transport message
				r.f.stamp(fp)
				r.advance(50 * time.Millisecond)
				if fp.Current.Load() != next || fp.HandshakeNeeded.Load() {
					t.Fatalf("after promotion: Current %p (want %p), HandshakeNeeded %v (want false: the session serves the held data)",
						fp.Current.Load(), next, fp.HandshakeNeeded.Load())
				}
			}
			for r.now()-t0 < int64(protocol.RekeyTimeout+time.Second) {
				r.advance(50 * time.Millisecond)
			}
			inits := ofType(r.f.sentSince(0), noise.TypeInitiation, 0)
			switch {
			case promoted && len(inits) != 0:
				t.Errorf("initiations with a promoted session = %d, want 0; sent %v", len(inits), types(r.f.sentSince(0)))
			case !promoted && len(inits) != 1:
				t.Errorf("initiations with data held and no promotion = %d, want 1; sent %v", len(inits), types(r.f.sentSince(0)))
			case !promoted && inits[0].at-t0 < int64(protocol.RekeyTimeout):
				t.Errorf("initiation %.3fs after our response, want at least RekeyTimeout (5 s)", secs(inits[0].at-t0))
			}
		})
	}
}

// TestUnansweredRekeyGivesUp: an initiator that sent data once on a session
// past RekeyAfterTime and then nothing more, whose rekey gets no response
// (the peer still answers data), sends the first initiation and
// MaxHandshakeAttempts+1 retries and gives up (whitepaper §6.4), as
// wireguard-go does: its rekey rule runs per message sent
// (keepKeyFreshSending), so one send restarts the count of attempts once.
// Acting again on the same send at every evaluation restarted the count
// until the session was rejected at 180 s and the retries went on 90 s
// past that.
func TestUnansweredRekeyGivesUp(t *testing.T) {
	const jitter = 200 * time.Millisecond
	r := newRig(t, rigOptions{wgEP: "198.18.0.2:51820", fixJitter: jitter})
	fp := r.fp()
	kp := r.establishAsInitiator()
	r.f.drop.Store(true)
	r.advance(time.Duration(kp.Created + int64(protocol.RekeyAfterTime+time.Second) - r.now()))
	mark := r.f.nsent()
	if !r.f.sendData(fp, ourPacket(1)) {
		t.Fatal("sendData at 121 s = false, want true")
	}
	// The peer answers the data (so its new-handshake timer stays quiet),
	// but no handshake response comes back.
	storeMax(&fp.Stamps.LastReceived, r.now()+1)
	for r.now()-kp.Created < int64(400*time.Second) {
		r.advance(50 * time.Millisecond)
	}
	inits := ofType(r.f.sentSince(mark), noise.TypeInitiation, 0)
	if want := protocol.MaxHandshakeAttempts + 2; len(inits) != want {
		t.Fatalf("initiations after one send at 121 s = %d, want %d (first and retries, then give up); %v", len(inits), want, types(inits))
	}
	if last, limit := inits[len(inits)-1].at-kp.Created, int64(121*time.Second)+int64(protocol.MaxHandshakeAttempts+1)*int64(protocol.RekeyTimeout+jitter+50*time.Millisecond); last > limit {
		t.Errorf("last initiation at +%.3fs, want by +%.3fs", secs(last), secs(limit))
	}
}

// TestCrossedHandshakeKeepsPeersSession: we answered the peer's initiation
// (its session waits in our Next) and then our own initiation completed.
// The peer, the initiator of the first session, sends with it from the
// moment it consumed our response, until our first message on the second
// reaches it; what it sent meanwhile must still be received. The kernel
// (add_new_keypair) and wireguard-go (BeginSymmetricSession) move the
// waiting Next to Previous; dropping it lost those packets.
func TestCrossedHandshakeKeepsPeersSession(t *testing.T) {
	r := newRig(t, rigOptions{})
	fp := r.fp()
	src := netip.MustParseAddrPort("198.18.0.2:51820")
	wgID := noise.NewStaticIdentity(r.wgKey, nil)
	wgHS := noise.NewHandshake(wgID, r.ourKey.PublicKey(), r.psk)
	const wgIndex1, wgIndex2 = 7, 8

	// The peer initiates; we answer (its session goes to our Next).
	var init1 [noise.InitiationSize]byte
	if err := wgHS.CreateInitiation(&init1, wgIndex1); err != nil {
		t.Fatal(err)
	}
	r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, SrcMAC: wgMAC, Data: init1[:]})
	resps := ofType(r.f.sentSince(0), noise.TypeResponse, 0)
	if len(resps) != 1 || fp.Next.Load() == nil {
		t.Fatalf("no response and Next after the peer's initiation; sent %v", types(r.f.sentSince(0)))
	}
	if err := wgHS.ConsumeResponse(resps[0].payload); err != nil {
		t.Fatal(err)
	}
	keys1, err := wgHS.DeriveKeys()
	if err != nil {
		t.Fatal(err)
	}
	peerKP1, err := fastpath.NewKeypair(&keys1.Send, &keys1.Receive, keys1.LocalIndex, keys1.RemoteIndex, true, r.now(), nil)
	if err != nil {
		t.Fatal(err)
	}

	// Our own initiation (data waiting, RekeyTimeout after the response),
	// answered by the peer: our session becomes Current.
	r.advance(protocol.RekeyTimeout)
	fp.HandshakeNeeded.Store(true)
	r.advance(50 * time.Millisecond)
	inits := ofType(r.f.sentSince(0), noise.TypeInitiation, 0)
	if len(inits) != 1 {
		t.Fatalf("initiations = %d, want 1; sent %v", len(inits), types(r.f.sentSince(0)))
	}
	if _, err := wgID.ConsumeInitiation(inits[0].payload, func(noise.PublicKey) *noise.Handshake { return wgHS }); err != nil {
		t.Fatal(err)
	}
	var resp2 [noise.ResponseSize]byte
	if err := wgHS.CreateResponse(&resp2, wgIndex2); err != nil {
		t.Fatal(err)
	}
	r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, SrcMAC: wgMAC, Data: resp2[:]})
	if cur := fp.Current.Load(); cur == nil || !cur.IsInitiator {
		t.Fatalf("Current after our exchange = %v, want our initiator keypair", cur)
	}

	// The peer's data on the first session, sent before our first message
	// on the second reached it.
	plain := r.wgPacket(1)
	msg := make([]byte, noise.TransportHeaderSize, noise.TransportHeaderSize+len(plain)+noise.TagSize)
	noise.PutTransportHeader(msg, peerKP1.RemoteIndex, 0)
	msg = peerKP1.Seal(msg, plain, 0)
	r.f.deliver(r.dev, msg)
	select {
	case <-r.f.inner:
	default:
		t.Fatalf("the peer's data on the session it initiated was dropped; Previous %v", fp.Previous.Load())
	}
	// That session was used: retired (at Reject-After-Time), it is not
	// counted as a responder keypair that expired unconfirmed (the sign of
	// a preshared key mismatch), though it was never confirmed.
	for r.now()-fakeEpoch < int64(protocol.RejectAfterTime+10*time.Second) {
		r.advance(time.Second)
	}
	if fp.Previous.Load() != nil && fp.Previous.Load().LocalIndex == peerKP1.RemoteIndex {
		t.Fatalf("the peer's first session is still in Previous after Reject-After-Time")
	}
	if got := r.dev.Stats().ResponderUnconfirmedTotal; got != 0 {
		t.Errorf("responder keypairs expired unconfirmed = %d, want 0 (the one retired had carried data)", got)
	}
}
