//go:build linux

package afxdp

import (
	"errors"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestFeatureTestCaches: a conclusive answer is cached (the probe runs
// once) and becomes a FeatureError naming the feature, the kernel and the
// fix; an inconclusive one is not cached.
func TestFeatureTestCaches(t *testing.T) {
	for _, tt := range []struct {
		name      string
		answer    error
		wantRuns  int
		wantNotSp bool
	}{
		{"present", nil, 1, false},
		{"absent", absent("flag %d refused", 7), 1, true},
		{"absent per cilium/ebpf", ebpf.ErrNotSupported, 1, true},
		{"cannot tell", errors.New("permission denied"), 3, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			runs := 0
			ft := &featureTest{name: "frobnication", minKernel: "9.1", fix: "frob it", fn: func() error { runs++; return tt.answer }}
			var err error
			for range 3 {
				err = ft.run()
			}
			if runs != tt.wantRuns {
				t.Errorf("probe ran %d times for 3 calls, want %d", runs, tt.wantRuns)
			}
			if got := errors.Is(err, dataplane.ErrNotSupported); got != tt.wantNotSp {
				t.Fatalf("errors.Is(%v, ErrNotSupported) = %v, want %v", err, got, tt.wantNotSp)
			}
			if tt.answer == nil && err != nil {
				t.Fatalf("run() = %v, want nil", err)
			}
			if !tt.wantNotSp {
				return
			}
			var fe *FeatureError
			if !errors.As(err, &fe) {
				t.Fatalf("run() = %T, want *FeatureError", err)
			}
			msg := err.Error()
			for _, want := range []string{"frobnication", "Linux " + kernelRelease(), "needs Linux 9.1 or later", "frob it"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			if strings.Contains(msg, errAbsent.Error()+":") {
				t.Errorf("error %q shows the internal marker", msg)
			}
			if errors.Is(tt.answer, ebpf.ErrNotSupported) && !errors.Is(err, ebpf.ErrNotSupported) {
				t.Errorf("cilium/ebpf's ErrNotSupported lost: %v", err)
			}
			t.Log(msg)
		})
	}
}

// TestKernelFeatures: this kernel (CI runs 6.x) has every feature the
// ports use; a missing one is a failure, not a skip.
func TestKernelFeatures(t *testing.T) {
	testenv.Root(t)
	for name, probe := range map[string]func() error{
		"shared UMEM": HaveSharedUMEM,
		"need_wakeup": HaveNeedWakeup,
		"kernel XDP":  kernelXDP,
	} {
		if err := probe(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestNativeXDPProbe asks the netdev family about a veth (native XDP, and
// not if its peer has more TX queues than it has RX queues) and a bridge
// (no native XDP, cached per driver), and checks how Open acts on the
// answer.
func TestNativeXDPProbe(t *testing.T) {
	p := newVethPair(t, 1)
	if err := p.b.Do(func() error { return HaveNativeXDP(p.v.B) }); err != nil {
		t.Fatalf("HaveNativeXDP(veth) = %v, want nil", err)
	}

	bridge := topo.UniqueName("wgbr")
	for _, args := range [][]string{{"link", "add", bridge, "type", "bridge"}, {"link", "set", bridge, "up"}} {
		if _, err := p.b.Run("ip", args...); err != nil {
			t.Fatal(err)
		}
	}
	err := p.b.Do(func() error { return HaveNativeXDP(bridge) })
	var fe *FeatureError
	if !errors.As(err, &fe) || !errors.Is(err, dataplane.ErrNotSupported) {
		t.Fatalf("HaveNativeXDP(bridge) = %v, want a FeatureError (ErrNotSupported)", err)
	}
	if !strings.Contains(err.Error(), `driver "bridge"`) || !strings.Contains(err.Error(), kernelRelease()) {
		t.Errorf("HaveNativeXDP(bridge) = %q, want the driver and the kernel named", err)
	}
	nativeXDP.Lock()
	cached := nativeXDP.byDriver["bridge"]
	nativeXDP.Unlock()
	if cached == nil || !cached.done {
		t.Error("the bridge driver's answer is not cached")
	}
	t.Log(err)

	// Open acts on it: native refused with the probe's words, auto goes
	// generic without trying.
	err = p.b.Do(func() error {
		port, err := Open(bridge, Config{Attach: AttachNative})
		if err == nil {
			port.Close()
		}
		return err
	})
	if !errors.Is(err, ErrXDPUnsupported) || !errors.As(err, &fe) {
		t.Fatalf("Open(bridge, AttachNative) = %v, want ErrXDPUnsupported with the FeatureError", err)
	}
	port := openIn(t, p.b, bridge, Config{})
	if port.NativeXDP() || !errors.As(port.NativeXDPError(), &fe) {
		t.Errorf("Open(bridge, AttachAuto): native %v, NativeXDPError %v; want generic and the FeatureError", port.NativeXDP(), port.NativeXDPError())
	}

	// A veth whose peer has more TX queues than it has RX queues.
	a, b := p.a, p.b
	odd := topo.UniqueName("wgvo")
	if _, err := a.Run("ip", "link", "add", odd+"a", "numtxqueues", "2", "numrxqueues", "2", "type", "veth",
		"peer", "name", odd+"b", "numtxqueues", "1", "numrxqueues", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run("ip", "link", "set", odd+"b", "netns", b.Name); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []struct {
		n   *topo.NS
		dev string
	}{{a, odd + "a"}, {b, odd + "b"}} {
		if err := ns.n.LinkUp(ns.dev); err != nil {
			t.Fatal(err)
		}
	}
	err = b.Do(func() error { return HaveNativeXDP(odd + "b") })
	if !errors.Is(err, dataplane.ErrNotSupported) || !strings.Contains(err.Error(), "RX queues") {
		t.Fatalf("HaveNativeXDP(veth, peer with 2 TX queues, 1 RX queue here) = %v, want ErrNotSupported with the fix", err)
	}
	t.Log(err)
	// Not cached for the driver: the first veth still has it.
	if err := p.b.Do(func() error { return HaveNativeXDP(p.v.B) }); err != nil {
		t.Errorf("HaveNativeXDP(veth) after a veth without = %v, want nil", err)
	}
}

// force replaces the probe *p with one that answers "absent" for the
// test's duration.
func force(t *testing.T, p *func() error, name string) {
	old := *p
	ft := &featureTest{name: name, minKernel: "99.0", fn: func() error { return absent("forced by the test") }}
	*p = ft.run
	t.Cleanup(func() { *p = old })
}

// TestSharedUMEMForcedAbsent: with the kernel said to lack UMEM sharing,
// the second port on a UMEM gets a private one, says why, and frames
// forwarded between the two are copied.
func TestSharedUMEMForcedAbsent(t *testing.T) {
	force(t, &haveSharedUMEM, "shared UMEM")
	p := newVethPair(t, 1)
	u, err := NewUMEM(UMEMConfig{NumFrames: 8192})
	if err != nil {
		t.Fatal(err)
	}
	a := openIn(t, p.a, p.v.A, Config{UMEM: u, Filter: Filter{All: true}})
	b := openIn(t, p.b, p.v.B, Config{UMEM: u, Filter: Filter{All: true}})
	var fe *FeatureError
	if !a.SharedUMEM() || a.SharedUMEMError() != nil {
		t.Errorf("first port: SharedUMEM %v (%v), want true: it owns the UMEM", a.SharedUMEM(), a.SharedUMEMError())
	}
	if b.SharedUMEM() || !errors.As(b.SharedUMEMError(), &fe) {
		t.Fatalf("second port: SharedUMEM %v, SharedUMEMError %v; want false and the FeatureError", b.SharedUMEM(), b.SharedUMEMError())
	}
	t.Log(b.SharedUMEMError())
	const n = 300
	forwardBack(t, p, a, b, n)
	if got := a.Stats().Copies; got != n {
		t.Errorf("A Copies = %d, want %d", got, n)
	}
}

// TestNeedWakeupForcedAbsent: with the kernel said to lack need_wakeup,
// the sockets bind without it and frames still flow both ways.
func TestNeedWakeupForcedAbsent(t *testing.T) {
	force(t, &haveNeedWakeup, "need_wakeup")
	p := newVethPair(t, 1)
	a := openIn(t, p.a, p.v.A, Config{Filter: Filter{All: true}})
	b := openIn(t, p.b, p.v.B, Config{Filter: Filter{All: true}})
	for _, port := range []*Port{a, b} {
		if port.queues[0].sock.wakeup {
			t.Fatalf("%s bound with need_wakeup", port.Name())
		}
	}
	sendTest(t, a.Queue(0).TX(), p.macA, p.macB, 3, 500)
	receiveTest(t, b, 3, 500)
	sendTest(t, b.Queue(0).TX(), p.macB, p.macA, 4, 500)
	receiveTest(t, a, 4, 500)
}
