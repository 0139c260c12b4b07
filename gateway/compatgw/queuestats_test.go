//go:build linux

package compatgw

import (
	"testing"

	"github.com/wgpio/wgpio/dataplane"
)

// TestStatsQueues: Stats carries each AF_XDP queue's own counters, the
// kernel's socket counters among them (what it drops before the bind or
// tundev read a frame), for both ports.
func TestStatsQueues(t *testing.T) {
	s := newSite(t)
	st := s.g.Stats()
	for _, p := range []struct {
		name string
		qs   []dataplane.Stats
	}{{"wan", st.WANQueues}, {"lan", st.LANQueues}} {
		if len(p.qs) == 0 {
			t.Fatalf("%s: no queue counters", p.name)
		}
		for i, q := range p.qs {
			for _, k := range dataplane.LossCounters {
				if _, ok := q.Backend[k]; !ok {
					t.Errorf("%s queue %d: no %s (Backend %v)", p.name, i, k, q.Backend)
				}
			}
		}
	}
}
