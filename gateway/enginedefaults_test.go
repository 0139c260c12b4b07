package gateway_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/noise"
)

// TestDefaultsFromEngine: a device over a *fastpath.Engine whose Options
// leave WANMAC zero sends from the engine's WAN port's MAC: the endpoint
// of a configured peer carries it (it carried 00:00:00:00:00:00, the
// source of every data frame to the peer on a real network). Its UAPI
// reports the engine's listen port when Options.ListenPort is zero (it
// reported none, and wg show no listening port).
func TestDefaultsFromEngine(t *testing.T) {
	d, _, wanMAC := newEngineDevice(t)
	peer, _ := noise.NewPrivateKey()
	pub := peer.PublicKey()
	if err := d.AddPeer(gateway.PeerConfig{PublicKey: pub, Endpoint: netip.MustParseAddrPort("198.18.0.2:51820"),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.2.0/24")}}); err != nil {
		t.Fatal(err)
	}
	ep := d.FastPeer(pub).Endpoint.Load()
	if ep == nil {
		t.Fatal("the configured peer has no endpoint")
	}
	if got, want := ep.SrcMAC, wanMAC; got != want {
		t.Errorf("endpoint SrcMAC = %x, want the WAN port's %x", got, want)
	}
	var get strings.Builder
	if err := d.IpcGet(&get); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(get.String(), "\nlisten_port=51820\n") {
		t.Errorf("IpcGet wrote\n%s\nwant listen_port=51820, the engine's", get.String())
	}
}

// newEngineDevice returns a device over a real, unstarted
// *fastpath.Engine on memport pairs (WAN address 198.18.0.1, listen port
// 51820, Options otherwise zero), and its WAN port's MAC, all closed
// at the test's end.
func newEngineDevice(t *testing.T) (*gateway.Device, *fastpath.Engine, [6]byte) {
	t.Helper()
	lan, host, err := memport.NewPair(memport.Config{Name: "l"})
	if err != nil {
		t.Fatal(err)
	}
	wan, far, err := memport.NewPair(memport.Config{Name: "w"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lan.Close(); host.Close(); wan.Close(); far.Close() })
	addr := netip.MustParseAddr("198.18.0.1")
	e, err := fastpath.New(fastpath.Config{LAN: lan, WAN: wan, ListenPort: 51820, WANAddr4: addr,
		WANResolver: fixedMAC(far.MAC()), LANResolver: fixedMAC(host.MAC())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	key, _ := noise.NewPrivateKey()
	d, err := gateway.New(gateway.Options{PrivateKey: key, Dataplane: e, WANAddr4: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, e, [6]byte(wan.MAC())
}

// TestAddPeerInvalidPrefix: a zero netip.Prefix among a peer's allowed IPs
// is refused before anything is applied, as AddPeers promises: taken by
// the device and then refused by the engine, the peer stayed in the
// device alone, and every later change to it (and a replace_peers set of
// the whole device) failed against the engine's set.
func TestAddPeerInvalidPrefix(t *testing.T) {
	d, _, _ := newEngineDevice(t)
	k, _ := noise.NewPrivateKey()
	pub := k.PublicKey()
	if err := d.AddPeer(gateway.PeerConfig{PublicKey: pub, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.0.0/24"), {}}}); err == nil ||
		!strings.Contains(err.Error(), "not a valid prefix") {
		t.Errorf("AddPeer with the zero Prefix = %v, want the prefix named invalid", err)
	}
	if n := len(d.Peers()); n != 0 {
		t.Fatalf("after the refused AddPeer the device has %d peers, want 0", n)
	}
	if err := d.AddPeer(gateway.PeerConfig{PublicKey: pub, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.0.0/24")}}); err != nil {
		t.Errorf("AddPeer of the same key, valid: %v", err)
	}
	k2, _ := noise.NewPrivateKey()
	if err := d.IpcSet(strings.NewReader("replace_peers=true\npublic_key=" + k2.PublicKey().Hex() + "\nallowed_ip=198.19.1.0/24\n")); err != nil {
		t.Errorf("replace_peers=true afterwards: %v", err)
	}
	if ps := d.Peers(); len(ps) != 1 || ps[0].PublicKey != k2.PublicKey() {
		t.Errorf("after replace_peers, peers %v, want the one set", ps)
	}
}
