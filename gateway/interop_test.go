package gateway

import (
	"bytes"
	"net/netip"
	"testing"
)

// TestInterop runs handshakes and transport data both ways between our
// Device (over the reference data path of fakeDP) and a stock wireguard-go
// device: the known answer is that wireguard-go accepts our messages and
// decrypts our data, and we decrypt its data.
func TestInterop(t *testing.T) {
	for _, tc := range []struct {
		name      string
		initiator string // "wg-go" or "us"
		psk       bool
		wgSrc     string // outer address of wireguard-go as we see it
	}{
		{"wg-go initiates, IPv4", "wg-go", false, "198.18.0.2:51820"},
		{"wg-go initiates, IPv4, PSK", "wg-go", true, "198.18.0.2:51820"},
		{"wg-go initiates, IPv6, PSK", "wg-go", true, "[2001:2::2]:51820"},
		{"we initiate, IPv4", "us", false, "198.18.0.2:51820"},
		{"we initiate, IPv4, PSK", "us", true, "198.18.0.2:51820"},
		{"we initiate, IPv6", "us", false, "[2001:2::2]:51820"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := rigOptions{psk: tc.psk}
			if tc.initiator == "wg-go" {
				o.ourEP = "127.0.0.1:1" // bindtest: the channel to our bind
			} else {
				o.wgEP = tc.wgSrc
			}
			r := newRig(t, o)
			src := netip.MustParseAddrPort(tc.wgSrc)
			r.f.wgSrc.Store(&src)
			fp := r.fp()

			if tc.initiator == "wg-go" {
				r.wgSend(1)
				got, ok := r.waitInner(waitLimit)
				if !ok {
					t.Fatalf("no data from wireguard-go; sent %v; stats %+v", types(r.f.sentSince(0)), r.dev.Stats())
				}
				if want := r.wgPacket(1); !bytes.Equal(got[:len(want)], want) {
					t.Fatalf("inner packet = %x, want %x", got, want)
				}
				if fp.Current.Load() == nil || fp.Current.Load().IsInitiator {
					t.Fatalf("after first data, Current = %v, want our responder keypair", fp.Current.Load())
				}
				if ep := fp.Endpoint.Load(); ep == nil || ep.Dst != src {
					t.Fatalf("endpoint = %v, want %v (the initiation's source)", ep, src)
				}
			} else {
				kp := r.establishAsInitiator()
				if !kp.IsInitiator {
					t.Fatalf("Current.IsInitiator = false, want true")
				}
				// wireguard-go answers our keepalive-confirmed session with data.
				r.wgSend(1)
				if _, ok := r.waitInner(waitLimit); !ok {
					t.Fatalf("no data from wireguard-go; sent %v", types(r.f.sentSince(0)))
				}
			}
			r.dev.Tick(r.now()) // learn the promotion
			for i := 2; i < 5; i++ {
				if !r.f.sendData(fp, ourPacket(i)) {
					t.Fatalf("sendData(%d) = false, want true", i)
				}
				got, ok := r.waitWG(waitLimit)
				if !ok {
					t.Fatalf("wireguard-go did not deliver packet %d", i)
				}
				if want := ourPacket(i); !bytes.Equal(got, want) {
					t.Fatalf("wireguard-go delivered %x, want %x", got, want)
				}
			}
			st := r.dev.Peers()[0]
			if st.LastHandshake.IsZero() {
				t.Errorf("Peers()[0].LastHandshake is zero after a handshake")
			}
		})
	}
}

func (r *rig) wgPacket(seq int) []byte {
	p := ourPacket(seq)
	// wireguard-go's inner packet to us: swap the addresses of ourPacket.
	q := append([]byte(nil), p...)
	copy(q[12:16], p[16:20])
	copy(q[16:20], p[12:16])
	return q
}
