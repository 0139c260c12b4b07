//go:build linux

package fastgw

import (
	"errors"
	"net/netip"
	"time"

	"github.com/wgpio/wgpio/arp"
)

// newMLDHost makes the MLD listener of owned mode's address addr on a
// VLAN of the trunk (lan: the LAN side), which reports its solicited-node
// groups, tagged by the worker, where a Linux router's VLAN device would:
// behind a switch or bridge that snoops MLD, the hosts' neighbour
// solicitations for addr reach us only so. Its source is addr when that
// is link-local, otherwise :: (RFC 3810 §5.2.13: the gateway has no
// link-local address on the VLAN). It sends nothing before Start
// (startEngine, once the workers run).
func (g *Gateway) newMLDHost(lan bool, mac [6]byte, addr netip.Addr, groups []netip.Addr) (*arp.MLDHost, error) {
	src := netip.IPv6Unspecified()
	if addr.IsLinkLocalUnicast() {
		src = addr.WithZone("")
	}
	return arp.NewMLDHost(arp.MLDHostConfig{MAC: mac, Src: src, Groups: groups, Send: func(frame []byte) error {
		if e := g.engine; e == nil || !e.SendFrame(lan, 0, frame) {
			return errors.New("fastgw: MLD report: the worker's mailbox is full or closed")
		}
		return nil
	}})
}

// mldLeaveWait bounds how long Close waits for the workers to send the
// MLD leave reports.
const mldLeaveWait = 200 * time.Millisecond

// closeMLD stops the MLD listeners, which send their leave reports
// through worker 0's mailbox, and waits (up to mldLeaveWait) until that
// worker has sent them: the engine closes next, and mail it has not taken
// by then is never sent.
func (g *Gateway) closeMLD() {
	if len(g.mld) == 0 || g.engine == nil {
		return
	}
	sent := func() uint64 { return g.engine.Stats()[0].ControlSent }
	reports := func() (n uint64) {
		for _, h := range g.mld {
			n += h.Stats().Reports
		}
		return n
	}
	before, r0 := sent(), reports()
	for _, h := range g.mld {
		h.Close()
	}
	want := before + reports() - r0
	for deadline := time.Now().Add(mldLeaveWait); sent() < want && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}
