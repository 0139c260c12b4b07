//go:build linux

package ethtool_test

import (
	"errors"
	"testing"

	"github.com/wgpio/wgpio/internal/ethtool"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestSetGet turns a veth's RX VLAN offload off and on again and reads it
// back each time.
func TestSetGet(t *testing.T) {
	tp := testenv.Topology(t, "etht")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	v, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const name = "rx-vlan-hw-parse"
	err = a.Do(func() error {
		f, err := ethtool.Get(v.A, name)
		if err != nil {
			return err
		}
		if !f[0].Available || !f[0].Active {
			t.Errorf("Get(veth, %s) = %+v, want available and active (veth's default)", name, f[0])
		}
		for _, on := range []bool{false, true} {
			if err := ethtool.Set(v.A, name, on); err != nil {
				return err
			}
			f, err := ethtool.Get(v.A, name)
			if err != nil {
				return err
			}
			if f[0].Active != on {
				t.Errorf("after Set(%s, %v): Get = %+v", name, on, f[0])
			}
		}
		if _, err := ethtool.Get(v.A, "no-such-feature"); !errors.Is(err, ethtool.ErrNoFeature) {
			t.Errorf("Get(no-such-feature) = %v, want ErrNoFeature", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
