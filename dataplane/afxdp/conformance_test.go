//go:build linux

package afxdp

import (
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/dataplanetest"
	"github.com/wgpio/wgpio/internal/testenv"
)

// TestConformance runs the dataplane conformance suite on two AF_XDP ports
// at the two ends of a veth pair between two namespaces, with private
// UMEMs and with one UMEM shared by both ports. One veth pair per queue
// count serves every call of the factory, so that CloseReopen reopens the
// same interfaces and Leaks sees only what the ports make.
func TestConformance(t *testing.T) {
	for _, shared := range []bool{false, true} {
		name := "private"
		if shared {
			name = "shared"
		}
		t.Run(name, func(t *testing.T) {
			// The requirements are checked, and the topology made, on
			// this test: a skip or failure from inside the suite's
			// subtests must name their own t.
			tp := testenv.Topology(t, "xdp")
			opts := dataplanetest.Options{Lossy: true, Frames: 100_000}
			pairs := map[int]*vethPair{}
			umems := map[int]*UMEM{}
			newPair := func(st *testing.T, queues int) (dataplane.Port, dataplane.Port) {
				vp := pairs[queues]
				if vp == nil {
					vp = newVethPairIn(st, tp, queues)
					pairs[queues] = vp
					if shared {
						// Mapped, as fastgw maps it.
						u, err := NewUMEM(UMEMConfig{NumFrames: 4 * queues * 4096, Mapped: true})
						if err != nil {
							st.Fatal(err)
						}
						umems[queues] = u
						t.Cleanup(func() { // after the suite closed its ports
							if err := u.Free(); err != nil {
								t.Errorf("Free the shared UMEM: %v", err)
							}
						})
					}
				}
				flows := uint16(16)
				fa := Filter{UDP: []UDPMatch{{Addr: netip.MustParseAddr("198.18.0.1"), PortLo: 40000, PortHi: 40000 + flows - 1}}}
				fb := Filter{UDP: []UDPMatch{{Addr: netip.MustParseAddr("198.18.0.2"), PortLo: 50000, PortHi: 50000 + flows - 1}}}
				a := openNoCleanup(st, vp, true, Config{Queues: queues, Filter: fa, UMEM: umems[queues]})
				b := openNoCleanup(st, vp, false, Config{Queues: queues, Filter: fb, UMEM: umems[queues]})
				return a, b
			}
			dataplanetest.Run(t, newPair, opts)
		})
	}
}

// openNoCleanup opens end A or B of vp; the suite closes it.
func openNoCleanup(t *testing.T, vp *vethPair, endA bool, cfg Config) *Port {
	t.Helper()
	ns, dev := vp.b, vp.v.B
	if endA {
		ns, dev = vp.a, vp.v.A
	}
	var p *Port
	if err := ns.Do(func() error {
		var err error
		p, err = Open(dev, cfg)
		return err
	}); err != nil {
		t.Fatalf("Open(%s): %v", dev, err)
	}
	return p
}
