//go:build linux

package afxdp

import (
	"net/netip"
	"strings"
	"testing"
)

// TestNewUMEMTooLarge: a UMEM larger than the machine's memory is an
// error. It was allocated on the Go heap as asked, and the runtime ended
// the process ("fatal error: out of memory", which no recover catches):
// Config{FillRingSize: 1 << 24} (a port's own UMEM is twice the fill
// ring) asked for 128 GiB.
func TestNewUMEMTooLarge(t *testing.T) {
	for _, n := range []int{1 << 40, 1 << 62} {
		u, err := NewUMEM(UMEMConfig{NumFrames: n})
		if err == nil || !strings.Contains(err.Error(), "larger than the machine's memory") {
			t.Errorf("NewUMEM(%d frames) = %v, %v; want an error naming the machine's memory", n, u, err)
		}
	}
	if _, err := NewUMEM(UMEMConfig{Mode: 9}); err == nil {
		t.Error("NewUMEM(Mode 9) took an unknown mode")
	}
}

// TestOpenLimits: options out of range are refused with an error saying
// which, before anything is attached: an unknown attach mode or UMEM mode
// (taken as auto), a negative prefix capacity (taken as 2^32 − 1), ring
// sizes that make the UMEM larger than the machine (a fatal out of
// memory), and more addresses than the filter's maps hold (the kernel's
// bare "key too big for map: argument list too long").
func TestOpenLimits(t *testing.T) {
	p := newVethPair(t, 1)
	addrs := func(n int) []netip.Addr {
		var a []netip.Addr
		for i := range n {
			a = append(a, netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}))
		}
		return a
	}
	var udp []UDPMatch
	for _, a := range addrs(MaxUDPAddrs + 1) {
		udp = append(udp, UDPMatch{Addr: a, PortLo: 51820, PortHi: 51820})
	}
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"attach mode", Config{Attach: 9}, "attach mode 9"},
		{"UMEM mode", Config{Mode: 9}, "UMEM mode 9"},
		{"prefix capacity", Config{Filter: Filter{Prefixes: true, PrefixCapacity: -1}}, "prefix capacity -1"},
		{"fill ring", Config{FillRingSize: 1 << 24}, "larger than the machine's memory"},
		{"UDP addresses", Config{Filter: Filter{UDP: udp}}, "more than 256 addresses of its family (MaxUDPAddrs)"},
		{"host addresses", Config{Filter: Filter{Prefixes: true, HostAddrs: addrs(MaxHostAddrs + 1)}}, "more than 256 addresses of its family (MaxHostAddrs)"},
		{"neighbours", Config{Filter: Filter{Neighbours: addrs(65)}}, "more than 64 addresses of its family"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := p.b.Do(func() error {
				port, err := Open(p.v.B, tt.cfg)
				if err == nil {
					port.Close()
				}
				return err
			})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open = %v, want an error containing %q", err, tt.want)
			}
			if attached(t, p.b, p.v.B) {
				t.Errorf("a program is attached to %s after the failed Open", p.v.B)
			}
		})
	}
	port := openIn(t, p.b, p.v.B, Config{Filter: Filter{Prefixes: true}})
	if err := port.SetUDP(udp); err == nil || !strings.Contains(err.Error(), "(MaxUDPAddrs)") {
		t.Errorf("SetUDP(%d addresses) = %v, want an error naming MaxUDPAddrs", len(udp), err)
	}
	if err := port.SetHostAddrs(addrs(MaxHostAddrs + 1)); err == nil || !strings.Contains(err.Error(), "(MaxHostAddrs)") {
		t.Errorf("SetHostAddrs(%d addresses) = %v, want an error naming MaxHostAddrs", MaxHostAddrs+1, err)
	}
}
