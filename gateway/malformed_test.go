package gateway

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
)

// wgInitiation makes a valid initiation from the rig's wireguard-go key to
// our device (with package noise, standing in for the peer).
// One Handshake makes them all, so that their TAI64N timestamps increase
// even within tai64n's 16 ms resolution.
func (r *rig) wgInitiation(t testing.TB) []byte {
	var msg [noise.InitiationSize]byte
	if r.wgHS == nil {
		id := noise.NewStaticIdentity(r.wgKey, nil)
		r.wgHS = noise.NewHandshake(id, r.ourKey.PublicKey(), r.psk)
	}
	if err := r.wgHS.CreateInitiation(&msg, 7); err != nil {
		t.Fatal(err)
	}
	return msg[:]
}

func TestMalformedMessagesDropped(t *testing.T) {
	r := newRig(t, rigOptions{})
	src := netip.MustParseAddrPort("198.18.0.2:51820")
	valid := r.wgInitiation(t)
	r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: valid})
	if n := len(ofType(r.f.sentSince(0), noise.TypeResponse, 0)); n != 1 {
		t.Fatalf("responses to a valid initiation = %d, want 1", n)
	}
	resp := make([]byte, noise.ResponseSize)
	resp[0] = noise.TypeResponse
	binary.LittleEndian.PutUint32(resp[noise.ResponseOffsetReceiver:], 0xdeadbeef)
	cookie := make([]byte, noise.CookieReplySize)
	cookie[0] = noise.TypeCookieReply
	binary.LittleEndian.PutUint32(cookie[noise.CookieReplyOffsetReceiver:], 0xdeadbeef)
	badMAC := append([]byte(nil), valid...)
	badMAC[noise.InitiationOffsetMAC1] ^= 1
	for _, tc := range []struct {
		name string
		msg  []byte
		want DropReason
	}{
		{"empty", nil, DropUnknownType},
		{"three bytes", []byte{1, 0, 0}, DropUnknownType},
		{"reserved bytes set", append([]byte{1, 1, 0, 0}, valid[4:]...), DropUnknownType},
		{"type 5", []byte{5, 0, 0, 0}, DropUnknownType},
		{"transport data on the control plane", make([]byte, 32), DropUnknownType},
		{"initiation too short", valid[:100], DropHandshakeInvalid},
		{"initiation too long", append(append([]byte(nil), valid...), 0), DropHandshakeInvalid},
		{"bad MAC1", badMAC, DropHandshakeInvalid},
		{"replayed initiation", valid, DropHandshakeInvalid},
		{"response to unknown index", resp, DropHandshakeInvalid},
		{"cookie reply to unknown index", cookie, DropUnknownIndex},
		{"cookie reply too short", cookie[:63], DropHandshakeInvalid},
		{"cookie reply too long", append(append([]byte(nil), cookie...), 0), DropHandshakeInvalid},
		{"cookie reply, reserved bytes set", append([]byte{3, 0, 1, 0}, cookie[4:]...), DropUnknownType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "transport data on the control plane" {
				tc.msg[0] = noise.TypeTransport
			}
			st := r.dev.Stats()
			before, noiseBefore := st.Drops, st.Noise.Drops.Total()
			mark := r.f.nsent()
			r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: tc.msg})
			st = r.dev.Stats()
			after := st.Drops
			if got := after[tc.want] - before[tc.want]; got != 1 {
				t.Errorf("Drops[%v] grew by %d, want 1 (all: %v → %v)", tc.want, got, before, after)
			}
			// handshake_invalid's reasons (wgpio stats' detail,
			// /metrics' wgpio_handshake_invalid_total) add up to it: a
			// cookie reply of the wrong size had none.
			if got := st.Noise.Drops.Total() - noiseBefore; tc.want == DropHandshakeInvalid && got != 1 {
				t.Errorf("the noise reasons grew by %d, want 1 (%v)", got, st.Noise.Drops.List())
			}
			if s := r.f.sentSince(mark); len(s) != 0 {
				t.Errorf("sent %v, want nothing", types(s))
			}
		})
	}
	if got := r.dev.Stats().Noise.Drops[noise.DropStaleTimestamp]; got != 1 {
		t.Errorf("noise Drops[stale timestamp] = %d, want 1 (the replay)", got)
	}
}

// FuzzHandleMessage feeds arbitrary handshake-channel payloads to a device
// with one peer: never a panic, never more than one message sent back.
func FuzzHandleMessage(f *testing.F) {
	r := newRig(f, rigOptions{})
	valid := r.wgInitiation(f)
	f.Add(valid)                                           // a valid initiation
	f.Add(valid[:noise.InitiationOffsetMAC2])              // truncated
	f.Add(append([]byte{2, 0, 0, 0}, make([]byte, 88)...)) // response of zeros
	f.Add(append([]byte{3, 0, 0, 0}, make([]byte, 60)...)) // cookie reply of zeros
	f.Add([]byte{})                                        // empty
	f.Fuzz(func(t *testing.T, msg []byte) {
		mark := r.f.nsent()
		r.f.clock.Add(int64(noise.HandshakeInitiationRate)) // past the flood limit
		r.dev.HandleMessage(fastpath.HandshakeMessage{Src: netip.MustParseAddrPort("198.18.0.2:51820"), Data: msg})
		if s := r.f.sentSince(mark); len(s) > 1 {
			t.Fatalf("sent %v for one message, want at most one", types(s))
		}
	})
}
