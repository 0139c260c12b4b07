package bind

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/dataplane/memport"
)

// TestNewRejectsConfig: New refuses a Config it cannot run with, and the
// error names the field at fault.
func TestNewRejectsConfig(t *testing.T) {
	a, b, err := memport.NewPair(memport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	routes, err := arp.NewStaticRoutes(nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl := arp.NewTable(arp.Config{})
	ok := Config{Port: a, Addr4: ourIP4, Addr6: ourIP6, ListenPort: 7, Routes: routes, Neighbours: tbl}
	if _, err := New(ok); err != nil {
		t.Fatalf("New(valid config) = %v", err)
	}
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want string // in the error
	}{
		{"no port", func(c *Config) { c.Port = nil }, "no port"},
		{"no address", func(c *Config) { c.Addr4, c.Addr6 = netip.Addr{}, netip.Addr{} }, "no listen address"},
		{"Addr4 IPv6", func(c *Config) { c.Addr4 = ourIP6 }, "Addr4 " + ourIP6.String() + " is not an IPv4"},
		{"Addr6 IPv4", func(c *Config) { c.Addr6 = ourIP4 }, "Addr6 " + ourIP4.String() + " is not an IPv6"},
		{"Addr6 IPv4 only", func(c *Config) { c.Addr4, c.Addr6 = netip.Addr{}, ourIP4 }, "Addr6 " + ourIP4.String() + " is not an IPv6"},
		{"port 0", func(c *Config) { c.ListenPort = 0 }, "listen port 0"},
		{"no routes", func(c *Config) { c.Routes = nil }, "no routes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			_, err := New(c)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New(%s) = %v, want an error with %q", tt.name, err, tt.want)
			}
		})
	}
}
