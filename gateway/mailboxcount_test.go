package gateway_test

import (
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/noise"
)

// TestMailboxFullCountedOnce: a handshake initiation a real engine's full
// mailbox refuses is one drop, counted once: as the control plane's
// mailbox_full, not as the worker's too (the sum of wgpio_drops_total and
// wgpio_control_drops_total counted it twice), nor as sent (initiations_sent
// counted every initiation made, refused or not). The engine is not started,
// so that nothing drains its worker's mailbox, and the device sends its
// initiations as the timers do (SendKeepalive to a peer without a session).
func TestMailboxFullCountedOnce(t *testing.T) {
	d, e, _ := newEngineDevice(t)
	const refused = 5
	var peers []gateway.PeerConfig
	for i := range fastpath.MailboxLen + refused {
		k, _ := noise.NewPrivateKey()
		a := netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)})
		peers = append(peers, gateway.PeerConfig{PublicKey: k.PublicKey(), Endpoint: netip.MustParseAddrPort("198.18.0.2:51820"),
			AllowedIPs: []netip.Prefix{netip.PrefixFrom(a, 32)}})
	}
	if err := d.AddPeers(peers); err != nil {
		t.Fatal(err)
	}
	for _, p := range peers {
		d.SendKeepalive(p.PublicKey)
	}
	var worker uint64
	for _, q := range e.Stats() {
		worker += q.Drops[fastpath.DropMailboxFull]
	}
	st := d.Stats()
	if control := st.Drops[gateway.DropMailboxFull]; control != refused || worker != 0 || st.InitiationsSent != fastpath.MailboxLen {
		t.Errorf("%d initiations into a mailbox of %d: control plane's mailbox_full %d, the worker's %d, initiations sent %d; want %d, 0, %d",
			len(peers), fastpath.MailboxLen, control, worker, st.InitiationsSent, refused, fastpath.MailboxLen)
	}
}

// TestRefusedAfterEngineClosedCountedClosed: a control packet the engine
// refuses because it is closed (a library user that closes the engine
// before the device) is counted as the control plane's closed, not as
// mailbox_full: the mailbox was not full, the dataplane was gone. Counted
// once: the engine counts no refused Send of its own.
func TestRefusedAfterEngineClosedCountedClosed(t *testing.T) {
	d, e, _ := newEngineDevice(t)
	k, _ := noise.NewPrivateKey()
	err := d.AddPeers([]gateway.PeerConfig{{PublicKey: k.PublicKey(), Endpoint: netip.MustParseAddrPort("198.18.0.2:51820"),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.0.1/32")}}})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	d.SendKeepalive(k.PublicKey()) // an initiation: no session yet
	st := d.Stats()
	var worker uint64
	for _, q := range e.Stats() {
		worker += q.Drops.Total()
	}
	if st.Drops[gateway.DropClosed] != 1 || st.Drops[gateway.DropMailboxFull] != 0 || worker != 0 || st.InitiationsSent != 0 {
		t.Errorf("an initiation after the engine closed: control plane's closed %d, mailbox_full %d, the engine's drops %d, initiations sent %d; want 1, 0, 0, 0",
			st.Drops[gateway.DropClosed], st.Drops[gateway.DropMailboxFull], worker, st.InitiationsSent)
	}
}
