package noise_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/wgpio/wgpio/noise"
)

// TestPaddingLen: whitepaper section 5.4.6, "padded to a multiple of 16",
// and never past the MTU (wireguard-go, the kernel).
func TestPaddingLen(t *testing.T) {
	tests := []struct{ n, mtu, want int }{
		{0, 1420, 0},              // keepalive
		{1, 1420, 15},             //
		{16, 1420, 0},             //
		{17, 1420, 15},            //
		{1408, 1420, 0},           //
		{1409, 1420, 11},          // 1424 > MTU: pad to 1420
		{1419, 1420, 1},           //
		{1420, 1420, 0},           //
		{1421, 1420, 0},           // longer than the MTU: no padding
		{100, 0, 12},              // no MTU: plain multiple of 16
		{1415, 1417, 2},           // MTU not a multiple of 16
		{100, -1, 12},             // mtu <= 0: no limit
		{math.MaxInt - 14, 0, 15}, // n + 15 would overflow
		{math.MaxInt, 1420, 0},
	}
	for _, tc := range tests {
		if got := noise.PaddingLen(tc.n, tc.mtu); got != tc.want {
			t.Errorf("PaddingLen(%d, %d) = %d, want %d", tc.n, tc.mtu, got, tc.want)
		}
	}
	// A negative length is the caller's bug: a panic, as a slice index
	// gives, not a padding (it was 1 for -1, 4 for -20).
	for _, n := range []int{-1, -20, math.MinInt} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("PaddingLen(%d, 1420) did not panic", n)
				}
			}()
			t.Errorf("PaddingLen(%d, 1420) = %d, want a panic", n, noise.PaddingLen(n, 1420))
		}()
	}
}

func TestTransportHeader(t *testing.T) {
	var b [noise.TransportMinSize]byte
	noise.PutTransportHeader(b[:], 0x04030201, 0x0807060504030201)
	want := []byte{4, 0, 0, 0, 1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8}
	if !bytes.Equal(b[:16], want) {
		t.Errorf("PutTransportHeader = % x, want % x", b[:16], want)
	}
	r, c, ok := noise.ParseTransportHeader(b[:])
	if !ok || r != 0x04030201 || c != 0x0807060504030201 {
		t.Errorf("ParseTransportHeader = %#x, %#x, %v", r, c, ok)
	}
	for _, bad := range [][]byte{b[:31], nil, append([]byte{4, 1}, b[2:]...), append([]byte{1}, b[1:]...)} {
		if _, _, ok := noise.ParseTransportHeader(bad); ok {
			t.Errorf("ParseTransportHeader(% x) ok, want not", bad)
		}
	}
	var nonce [12]byte
	noise.PutNonce(&nonce, 0x0807060504030201)
	if want := []byte{0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}; !bytes.Equal(nonce[:], want) {
		t.Errorf("PutNonce = % x, want % x", nonce, want)
	}
	if n := testing.AllocsPerRun(100, func() {
		noise.PutTransportHeader(b[:], 1, 2)
		noise.ParseTransportHeader(b[:])
		noise.PutNonce(&nonce, 3)
		noise.PaddingLen(100, 1420)
		noise.MessageReceiver(b[:])
	}); n != 0 {
		t.Errorf("transport helpers allocs = %v, want 0", n)
	}
}

func TestMessageReceiver(t *testing.T) {
	resp := make([]byte, noise.ResponseSize)
	resp[0] = noise.TypeResponse
	resp[8] = 0x11
	cookie := make([]byte, noise.CookieReplySize)
	cookie[0] = noise.TypeCookieReply
	cookie[4] = 0x22
	data := make([]byte, noise.TransportMinSize)
	noise.PutTransportHeader(data, 0x33, 9)
	init := make([]byte, noise.InitiationSize)
	init[0] = noise.TypeInitiation
	tests := []struct {
		name string
		msg  []byte
		want uint32
		ok   bool
	}{
		{"response", resp, 0x11, true},
		{"cookie reply", cookie, 0x22, true},
		{"transport", data, 0x33, true},
		{"initiation", init, 0, false},
		{"short response", resp[:91], 0, false},
		{"short transport", data[:31], 0, false},
		{"empty", nil, 0, false},
	}
	for _, tc := range tests {
		if got, ok := noise.MessageReceiver(tc.msg); got != tc.want || ok != tc.ok {
			t.Errorf("MessageReceiver(%s) = %#x, %v; want %#x, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
