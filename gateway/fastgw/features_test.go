//go:build linux

package fastgw_test

import (
	"testing"

	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestWithoutSharedUMEM: on a kernel that cannot share a UMEM between the
// WAN and LAN ports (forced here; Linux before 5.10), the gateway opens a
// UMEM for each, copies the frames between them, and carries traffic both
// ways as before.
func TestWithoutSharedUMEM(t *testing.T) {
	if err := afxdp.HaveSharedUMEM(); err != nil {
		t.Fatalf("this kernel: HaveSharedUMEM() = %v, want nil", err)
	}
	t.Cleanup(fastgw.SetSharedUMEMProbe(func() error {
		return &afxdp.FeatureError{Feature: "AF_XDP shared UMEM (forced by the test)", MinKernel: "5.10", Kernel: "test"}
	}))
	s := newSite(t, twosite.Config{})
	testenv.Tool(t, "ping", "iputils-ping")
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	ping(t, s.HostB, twosite.HostA4.String(), 0)
	tcpTransfer(t, s.HostA, s.HostB, twosite.HostB4, 1<<20)
	wan, lan := s.Gateway.Ports()
	w, l := wan.(*afxdp.Port), lan.(*afxdp.Port)
	if w.UMEM() == l.UMEM() {
		t.Fatal("WAN and LAN on one UMEM although the kernel was said not to share")
	}
	if copies := w.Stats().Copies + l.Stats().Copies; copies == 0 {
		t.Error("no frame copied between the two UMEMs")
	}
}
