//go:build linux

package afxdp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/cilium/ebpf"
)

// The program's maps changed while it runs: the LAN match's prefixes, the
// WAN filter's UDP matches and the LAN filter's host addresses.

// AddPrefix adds a destination prefix to the LAN match (Filter.Prefixes).
// Safe for concurrent use with traffic: the program sees it at once.
// After Close it returns an error wrapping net.ErrClosed, as DeletePrefix,
// SetUDP and SetHostAddrs do.
func (p *Port) AddPrefix(pfx netip.Prefix) error {
	if err := p.lockMaps(); err != nil {
		return fmt.Errorf("add prefix %v: %w", pfx, err)
	}
	defer p.mu.Unlock()
	m, k, err := p.prog.prefixKey(pfx)
	if err != nil {
		return fmt.Errorf("add prefix: %w", err)
	}
	if err := m.Put(k, uint32(1)); err != nil {
		return fmt.Errorf("add prefix %v: %w", pfx, err)
	}
	return nil
}

// AddPrefixes adds pfxs, prefixes of one family (all IPv4 or all IPv6), as
// AddPrefix adds each, in one BPF_MAP_UPDATE_BATCH call (Linux 5.6; one
// update a prefix where the kernel has none): a change of 100,000 peers
// makes one system call, not 100,000. It returns how many of pfxs, from
// the first, are in the map; on an error the one after them was refused
// (the map full: ENOSPC or E2BIG) and those after it were not tried.
func (p *Port) AddPrefixes(pfxs []netip.Prefix) (int, error) {
	return p.prefixBatch("add", pfxs, &p.noBatch,
		func(m *ebpf.Map, keys any) (int, error) {
			vals := make([]uint32, len(pfxs))
			for i := range vals {
				vals[i] = 1 // as AddPrefix puts
			}
			return m.BatchUpdate(keys, vals, nil)
		},
		func(m *ebpf.Map, k any) error { return m.Put(k, uint32(1)) })
}

// DeletePrefix removes a prefix added with AddPrefix.
func (p *Port) DeletePrefix(pfx netip.Prefix) error {
	if err := p.lockMaps(); err != nil {
		return fmt.Errorf("delete prefix %v: %w", pfx, err)
	}
	defer p.mu.Unlock()
	m, k, err := p.prog.prefixKey(pfx)
	if err != nil {
		return fmt.Errorf("delete prefix: %w", err)
	}
	if err := m.Delete(k); err != nil {
		return fmt.Errorf("delete prefix %v: %w", pfx, err)
	}
	return nil
}

// DeletePrefixes removes pfxs, prefixes of one family added with AddPrefix
// or AddPrefixes, as DeletePrefix removes each, in one
// BPF_MAP_DELETE_BATCH call (Linux 5.6; one delete a prefix where the
// kernel has none): a removal of 100,000 peers (wg syncconf, the
// gateway's Close) makes one system call, not 100,000. It returns how
// many of pfxs, from the first, are out of the map; on an error the one
// after them was not deleted (not in the map: an error wrapping
// ebpf.ErrKeyNotExist) and those after it were not tried.
func (p *Port) DeletePrefixes(pfxs []netip.Prefix) (int, error) {
	return p.prefixBatch("delete", pfxs, &p.noDeleteBatch,
		func(m *ebpf.Map, keys any) (int, error) { return m.BatchDelete(keys, nil) },
		func(m *ebpf.Map, k any) error { return m.Delete(k) })
}

// prefixBatch is AddPrefixes and DeletePrefixes (op "add" or "delete"):
// batch applied to the keys of pfxs, or, once the kernel said it has no
// batch for the map (*noBatch, set then), one applied to each key in
// turn. It returns how many of pfxs, from the first, it did, and names
// the prefix that failed.
func (p *Port) prefixBatch(op string, pfxs []netip.Prefix, noBatch *bool,
	batch func(m *ebpf.Map, keys any) (int, error), one func(m *ebpf.Map, k any) error) (int, error) {
	if len(pfxs) == 0 {
		return 0, nil
	}
	if err := p.lockMaps(); err != nil {
		return 0, fmt.Errorf("%s prefixes: %w", op, err)
	}
	defer p.mu.Unlock()
	m, keys, err := p.prog.prefixKeys(pfxs)
	if err != nil {
		return 0, fmt.Errorf("%s prefixes: %w", op, err)
	}
	if !*noBatch {
		n, err := batch(m, keys)
		switch {
		case err == nil:
			return len(pfxs), nil
		case errors.Is(err, ebpf.ErrNotSupported) && n == 0:
			*noBatch = true // the kernel's LPM trie has no batch: one at a time
		case n < len(pfxs):
			return n, fmt.Errorf("%s prefix %v: %w", op, pfxs[n], err)
		default:
			return n, fmt.Errorf("%s prefixes: %w", op, err)
		}
	}
	for i, pfx := range pfxs {
		mm, k, err := p.prog.prefixKey(pfx)
		if err == nil {
			err = one(mm, k)
		}
		if err != nil {
			return i, fmt.Errorf("%s prefix %v: %w", op, pfx, err)
		}
	}
	return len(pfxs), nil
}

// errPortClosed is the error of the calls that change a port's maps
// after Close.
var errPortClosed = fmt.Errorf("afxdp: port closed: %w", net.ErrClosed)

// lockMaps takes p.mu for a call that changes the program's maps and
// returns nil, or returns errPortClosed without it after Close (which
// closes the maps under p.mu): the call must not use their descriptors,
// closed, or reused by then for another file.
func (p *Port) lockMaps() error {
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return errPortClosed
	}
	return nil
}

// SetUDP replaces the UDP matches of the WAN filter (Filter.UDP) while the
// port runs: a new listen port, an address added or removed. The addresses
// not in matches are removed first, then those of matches put (an address
// in both is never out of the map, its port range replaced in place: a
// datagram to an address and port in both is never passed to the kernel
// meanwhile), so that a set of MaxUDPAddrs addresses of a family fits
// whatever the old one held. With more, the error names the first address
// that did not fit; those before it are in the map.
func (p *Port) SetUDP(matches []UDPMatch) error {
	if err := p.lockMaps(); err != nil {
		return fmt.Errorf("set UDP matches: %w", err)
	}
	defer p.mu.Unlock()
	keep4 := make(map[[4]byte]bool)
	keep6 := make(map[[16]byte]bool)
	for _, u := range matches {
		if u.PortLo > u.PortHi {
			return fmt.Errorf("set UDP matches: port range %d-%d is empty", u.PortLo, u.PortHi)
		}
		switch a := u.Addr.Unmap(); {
		case a.Is4():
			keep4[a.As4()] = true
		case a.Is6():
			keep6[a.As16()] = true
		default:
			return fmt.Errorf("set UDP match: invalid address %v", u.Addr)
		}
	}
	if err := deleteStale(p.prog.udp4, keep4, "UDP match"); err != nil {
		return err
	}
	if err := deleteStale(p.prog.udp6, keep6, "UDP match"); err != nil {
		return err
	}
	for _, u := range matches {
		v := portRange{u.PortLo, u.PortHi}
		var err error
		if a := u.Addr.Unmap(); a.Is4() {
			err = p.prog.udp4.Put(a.As4(), v)
		} else {
			err = p.prog.udp6.Put(a.As16(), v)
		}
		if err != nil {
			return fmt.Errorf("set UDP match %v: %w", u.Addr, mapFull(err, MaxUDPAddrs, "MaxUDPAddrs"))
		}
	}
	return nil
}

// SetHostAddrs replaces the host addresses of the LAN filter
// (Filter.HostAddrs: frames to them go to the kernel) while the port
// runs: the interface's addresses changed. The addresses not in addrs are
// removed first, then those of addrs added in order, so that an address
// in both is never out of the map (a frame to it is never redirected
// meanwhile) and a set as large as the old one, disjoint from it, fits.
// At most MaxHostAddrs of each family (the maps' size): the error names
// the first address that did not fit; those before it are in the map.
func (p *Port) SetHostAddrs(addrs []netip.Addr) error {
	if err := p.lockMaps(); err != nil {
		return fmt.Errorf("set host addresses: %w", err)
	}
	defer p.mu.Unlock()
	keep4 := make(map[[4]byte]bool)
	keep6 := make(map[[16]byte]bool)
	for _, a := range addrs {
		switch a = a.Unmap(); {
		case a.Is4():
			keep4[a.As4()] = true
		case a.Is6():
			keep6[a.As16()] = true
		default:
			return fmt.Errorf("set host address: invalid address %v", a)
		}
	}
	if err := deleteStale(p.prog.host4, keep4, "host address"); err != nil {
		return err
	}
	if err := deleteStale(p.prog.host6, keep6, "host address"); err != nil {
		return err
	}
	one := uint32(1)
	for _, a := range addrs {
		var err error
		if a = a.Unmap(); a.Is4() {
			err = p.prog.host4.Put(a.As4(), one)
		} else {
			err = p.prog.host6.Put(a.As16(), one)
		}
		if err != nil {
			return fmt.Errorf("set host address %v: %w", a, mapFull(err, MaxHostAddrs, "MaxHostAddrs"))
		}
	}
	return nil
}

// deleteStale deletes from m, a map keyed by IPv4 ([4]byte) or IPv6
// ([16]byte) addresses, every key keep does not hold; what names its
// entries in the error.
func deleteStale[K [4]byte | [16]byte](m *ebpf.Map, keep map[K]bool, what string) error {
	var stale []K
	var k K
	err := m.NextKey(nil, &k)
	for ; err == nil; err = m.NextKey(k, &k) {
		if !keep[k] {
			stale = append(stale, k)
		}
	}
	if !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("list %ss: %w", what, err)
	}
	for _, k := range stale {
		if err := m.Delete(k); err != nil {
			return fmt.Errorf("delete %s %v: %w", what, keyAddr(k), err)
		}
	}
	return nil
}

// keyAddr is the address of a map key.
func keyAddr[K [4]byte | [16]byte](k K) netip.Addr {
	if b, ok := any(k).([4]byte); ok {
		return netip.AddrFrom4(b)
	}
	return netip.AddrFrom16(any(k).([16]byte))
}
