package gateway

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
)

// TestNoiseStatsAcrossKeys: the reasons of handshake_invalid
// (Stats.Noise.Drops, wgpio_handshake_invalid_total) add up to it and
// never go back, across changes of the private key (wg set private-key,
// a reload with a new key) and its removal: they were the current
// identity's alone, and went back to 0 at each change.
func TestNoiseStatsAcrossKeys(t *testing.T) {
	r := newRig(t, rigOptions{})
	src := netip.MustParseAddrPort("198.18.0.2:51820")
	bad := r.wgInitiation(t)
	bad[noise.InitiationOffsetMAC1] ^= 1
	var last uint64
	check := func(when string, want uint64) {
		t.Helper()
		s := r.dev.Stats()
		if got, inv := s.InvalidReasons().Total(), s.Drops[DropHandshakeInvalid]; got != inv {
			t.Errorf("%s: handshake_invalid %d, its reasons add up to %d (%v)", when, inv, got, s.InvalidReasons().List())
		}
		n := s.Noise.Drops[noise.DropBadMAC1]
		if n != want || n < last {
			t.Errorf("%s: bad_mac1 %d (was %d), want %d", when, n, last, want)
		}
		last = n
	}
	r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: bad})
	expect := uint64(1)
	check("first key", expect)
	zero := strings.Repeat("0", 64)
	for _, k := range []string{"", "", zero, ""} {
		if k == "" {
			key, err := noise.NewPrivateKey()
			if err != nil {
				t.Fatal(err)
			}
			k = key.Hex()
		}
		if err := r.dev.IpcSet(strings.NewReader("private_key=" + k + "\n")); err != nil {
			t.Fatal(err)
		}
		check("after a change", expect)
		r.dev.zeroRetired()
		check("the old identity erased", expect)
		// A bad MAC1 with any key (without one: no_private_key).
		r.dev.HandleMessage(fastpath.HandshakeMessage{Src: src, Data: bad})
		if k != zero {
			expect++
		}
		check("a message of the new key", expect)
	}
}
