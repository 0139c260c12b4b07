//go:build linux

package main

import (
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/config"
)

func TestMixedEndpoints(t *testing.T) {
	ep := func(s string) config.Peer { return config.Peer{Endpoint: netip.MustParseAddrPort(s)} }
	for _, c := range []struct {
		name  string
		peers []config.Peer
		want  bool
	}{
		{"none", nil, false},
		{"ipv4", []config.Peer{ep("198.18.0.2:51820"), ep("198.18.0.3:51820")}, false},
		{"ipv6", []config.Peer{ep("[2001:db8::2]:51820")}, false},
		{"both", []config.Peer{ep("198.18.0.2:51820"), {}, ep("[2001:db8::2]:51820")}, true},
		{"mapped", []config.Peer{ep("198.18.0.2:51820"), ep("[::ffff:198.18.0.3]:51820")}, true},
		{"roaming", []config.Peer{ep("198.18.0.2:51820"), {}}, false},
	} {
		if got := mixedEndpoints(&config.File{Peers: c.peers}); got != c.want {
			t.Errorf("%s: mixedEndpoints = %v, want %v", c.name, got, c.want)
		}
	}
}
