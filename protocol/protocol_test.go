package protocol

import (
	"testing"
	"time"
)

// TestValues checks the constants against the numbers of the whitepaper
// (sections 5.4 and 6.1), spelled out independently.
func TestValues(t *testing.T) {
	for _, tt := range []struct {
		name      string
		got, want uint64
	}{
		{"RekeyAfterMessages", RekeyAfterMessages, 1 << 60},
		{"RejectAfterMessages", RejectAfterMessages, ^uint64(0) - (1 << 13)}, // 2^64 - 2^13 - 1
		// type(1) reserved(3) sender(4) ephemeral(32) static(32+16)
		// timestamp(12+16) mac1(16) mac2(16)
		{"InitiationSize", InitiationSize, 1 + 3 + 4 + KeySize + KeySize + TagSize + TimestampSize + TagSize + 2*MACSize},
		// type(1) reserved(3) sender(4) receiver(4) ephemeral(32)
		// empty(0+16) mac1(16) mac2(16)
		{"ResponseSize", ResponseSize, 1 + 3 + 4 + 4 + KeySize + TagSize + 2*MACSize},
		// type(1) reserved(3) receiver(4) nonce(24) cookie(16+16)
		{"CookieReplySize", CookieReplySize, 1 + 3 + 4 + CookieNonceSize + MACSize + TagSize},
		{"TransportHeaderSize", TransportHeaderSize, 1 + 3 + 4 + 8},
		{"TransportOffsetContent", TransportOffsetContent, TransportHeaderSize},
		{"TransportMinSize", TransportMinSize, 32},
		{"MaxHandshakeAttempts", uint64(MaxHandshakeAttempts), 18},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %d, want %d", tt.name, tt.got, tt.want)
		}
	}
	for _, tt := range []struct {
		name      string
		got, want time.Duration
	}{
		{"RekeyAfterTime", RekeyAfterTime, 120 * time.Second},
		{"RejectAfterTime", RejectAfterTime, 180 * time.Second},
		{"RekeyAttemptTime", RekeyAttemptTime, 90 * time.Second},
		{"RekeyTimeout", RekeyTimeout, 5 * time.Second},
		{"KeepaliveTimeout", KeepaliveTimeout, 10 * time.Second},
		{"CookieRefreshTime", CookieRefreshTime, 120 * time.Second},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}
