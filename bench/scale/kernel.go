//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/topo"
)

// kernelPerPeer measures what each peer of a fast-path gateway costs the
// kernel beside the Go heap, for n peers of one /32 and one /128 each (as
// the memory part configures them):
//
//   - kernel_routes_per_peer and kernel_route_per_peer_bytes: gateway/fastgw
//     routes every allowed-IPs prefix into the exception TUN, one route per
//     prefix; measured as the growth of the kernel's slab memory (Slab in
//     /proc/meminfo) while n×2 such routes are added to a veth in a
//     namespace of our own (machine-wide: other work on the machine adds
//     noise, small against 100,000 peers' routes);
//   - kernel_bpf_entries_per_peer and kernel_bpf_per_peer_bytes: the LAN
//     XDP program's prefix maps (dataplane/afxdp wgpio_lpm4 and wgpio_lpm6,
//     LPM tries without preallocation) hold one entry per prefix; measured
//     as the maps' memory the kernel reports (memlock in the map's fdinfo).
//
// It needs root (a namespace, BPF maps); without it, it reports nothing and
// says so.
func kernelPerPeer(e *env, n int, out map[string]any) error {
	if os.Geteuid() != 0 {
		e.Logf("memory: kernel cost per peer not measured: needs root (a namespace, BPF maps)")
		return nil
	}
	// BPF: the two LPM tries of dataplane/afxdp's LAN program.
	m4, err := ebpf.NewMap(&ebpf.MapSpec{Name: "scale_lpm4", Type: ebpf.LPMTrie, KeySize: 8, ValueSize: 4, MaxEntries: uint32(n), Flags: unix.BPF_F_NO_PREALLOC})
	if err != nil {
		return fmt.Errorf("LPM trie: %w", err)
	}
	defer m4.Close()
	m6, err := ebpf.NewMap(&ebpf.MapSpec{Name: "scale_lpm6", Type: ebpf.LPMTrie, KeySize: 20, ValueSize: 4, MaxEntries: uint32(n), Flags: unix.BPF_F_NO_PREALLOC})
	if err != nil {
		return fmt.Errorf("LPM trie: %w", err)
	}
	defer m6.Close()
	bpf0 := memlock(m4) + memlock(m6)
	for i := range n {
		pp := peerPrefixes(i, 0)
		var k4 [8]byte
		k4[0] = 32
		a4 := pp[0].Addr().As4()
		copy(k4[4:], a4[:])
		var k6 [20]byte
		k6[0] = 128
		a6 := pp[1].Addr().As16()
		copy(k6[4:], a6[:])
		v := uint32(i)
		if err := m4.Put(k4[:], v); err != nil {
			return fmt.Errorf("LPM trie entry %d: %w", i, err)
		}
		if err := m6.Put(k6[:], v); err != nil {
			return fmt.Errorf("LPM trie entry %d: %w", i, err)
		}
	}
	bpf1 := memlock(m4) + memlock(m6)
	out["kernel_bpf_entries_per_peer"] = 2
	out["kernel_bpf_per_peer_bytes"] = perPeer(bpf1, bpf0, n)

	// Routes: into a veth (up, its peer down), in a namespace of our own.
	tp := topo.New("scm")
	defer tp.Close()
	ns, err := tp.NewNS("r")
	if err != nil {
		return err
	}
	h := ns.Handle()
	la := netlink.NewLinkAttrs()
	la.Name = "scale0"
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "scale1"}); err != nil {
		return fmt.Errorf("veth: %w", err)
	}
	link, err := h.LinkByName("scale0")
	if err != nil {
		return err
	}
	if err := h.LinkSetUp(link); err != nil {
		return err
	}
	slab0 := slabBytes()
	t := time.Now()
	for i := range n {
		for _, p := range peerPrefixes(i, 0) {
			r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: prefixNet(p)}
			if err := h.RouteReplace(r); err != nil {
				return fmt.Errorf("route %v: %w", p, err)
			}
		}
	}
	slab1 := slabBytes()
	e.Logf("memory: kernel: %d routes in %.1f s, slab %d → %d; LPM maps %d → %d bytes", 2*n, time.Since(t).Seconds(), slab0, slab1, bpf0, bpf1)
	out["kernel_routes_per_peer"] = 2
	out["kernel_route_per_peer_bytes"] = perPeer(slab1, slab0, n)
	return nil
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// memlock is the memory the kernel accounts to map m (its fdinfo's
// memlock line; for an LPM trie, what its entries take).
func memlock(m *ebpf.Map) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", m.FD()))
	if err != nil {
		return 0
	}
	return fieldBytes(b, "memlock:", 1)
}

// slabBytes is the kernel's slab memory (Slab in /proc/meminfo).
func slabBytes() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return fieldBytes(b, "Slab:", 1024)
}

// fieldBytes finds the line starting with key in b and returns its first
// number times unit.
func fieldBytes(b []byte, key string, unit uint64) uint64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte(key)); ok {
			f := bytes.Fields(v)
			if len(f) == 0 {
				return 0
			}
			x, _ := strconv.ParseUint(string(f[0]), 10, 64)
			return x * unit
		}
	}
	return 0
}
