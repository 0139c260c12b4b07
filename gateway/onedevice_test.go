package gateway_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/noise"
)

// TestOneDeviceAnEngine: New refuses a second Device on an engine that
// has one (both would drain its handshake queue and set its peers, each
// undoing the other's configuration), and takes one again once the first
// is closed.
func TestOneDeviceAnEngine(t *testing.T) {
	wanA, wanB, err := memport.NewPair(memport.Config{Name: "wan"})
	if err != nil {
		t.Fatal(err)
	}
	defer wanA.Close()
	defer wanB.Close()
	key, _ := noise.NewPrivateKey()
	addr := netip.MustParseAddr("198.18.0.1")
	s, err := newSite("lan", wanA, addr, key)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	opts := gateway.Options{PrivateKey: key, ListenPort: 51820, Dataplane: s.eng, WANAddr4: addr}
	if d, err := gateway.New(opts); err == nil || !strings.Contains(err.Error(), "already has a Device") {
		if d != nil {
			d.Close()
		}
		t.Fatalf("a second New on the engine = %v, want an error naming the Device it has", err)
	}
	if err := s.dev.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := gateway.New(opts)
	if err != nil {
		t.Fatalf("New after the first Device closed = %v, want a Device", err)
	}
	s.dev = d // closed by s.close
}
