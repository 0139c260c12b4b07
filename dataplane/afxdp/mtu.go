//go:build linux

package afxdp

import "fmt"

// MTU is the interface's MTU at Open, then SetMTU's.
func (p *Port) MTU() int { return int(p.curMTU.Load()) }

// MaxMTU is the largest MTU whose untagged frames the port's frames hold
// (MaxFrameLen of its UMEM's frame size, less the Ethernet header: 3,822
// bytes with DefaultFrameSize), the largest SetMTU takes.
func (p *Port) MaxMTU() int {
	pool := p.umem.pool
	return pool.FrameSize() - pool.Headroom() - vlanTagLen - ethHeaderLen
}

// setMTU makes mtu the port's MTU, Transmit's bound the frames of mtu or
// what a frame holds (MaxMTU), whichever is shorter.
func (p *Port) setMTU(mtu int) {
	p.curMTU.Store(int32(mtu))
	p.txMax.Store(uint32(min(mtu, p.MaxMTU()) + ethHeaderLen))
}

// SetMTU makes mtu, in bytes of IP packet, the port's MTU (MTU) and
// Transmit's bound (frames of mtu + 14 bytes, + 4 with an 802.1Q tag): a
// gateway calls it when the interface's MTU changes (ip link set dev eth1
// mtu 2000), as Linux holds what it sends to the device's MTU of the
// moment, so that a raised MTU takes effect at once, without a restart:
// the frames of the UMEM are of a fixed size, sized at Open for the
// largest MTU they hold (MaxMTU), so nothing is allocated. It returns an
// error, changing nothing, for an MTU below 68 (RFC 791 §3.2: every IPv4
// link carries 68 bytes) or above MaxMTU, and after Close an error
// wrapping net.ErrClosed, as AddPrefix. Safe for concurrent use with
// Transmit, whose call in progress keeps the bound it started with.
func (p *Port) SetMTU(mtu int) error {
	if p.closed.Load() {
		return fmt.Errorf("set MTU %d of %s: %w", mtu, p.name, errPortClosed)
	}
	if mtu < minMTU || mtu > p.MaxMTU() {
		return fmt.Errorf("afxdp: MTU %d of %s outside [%d, %d] (an AF_XDP frame of %d bytes holds no longer frame)", mtu, p.name, minMTU, p.MaxMTU(), p.umem.pool.FrameSize())
	}
	p.setMTU(mtu)
	return nil
}
