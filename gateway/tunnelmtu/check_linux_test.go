package tunnelmtu

import (
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/afxdp"
)

// TestAFXDPMaxFrame: the largest frame TestCheckFrames gives CheckFrames
// is the one the gateways' AF_XDP ports take (AF_XDP is Linux only).
func TestAFXDPMaxFrame(t *testing.T) {
	if got := afxdp.MaxFrameLen(dataplane.DefaultFrameSize); got != afxdpMaxFrame {
		t.Errorf("afxdp.MaxFrameLen(%d) = %d, want %d", dataplane.DefaultFrameSize, got, afxdpMaxFrame)
	}
}
