package memport_test

import (
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/dataplanetest"
	"github.com/wgpio/wgpio/dataplane/memport"
)

func newPairFunc(cfg memport.Config) dataplanetest.NewPairFunc {
	return func(t *testing.T, queues int) (a, b dataplane.Port) {
		c := cfg
		c.Queues = queues
		pa, pb, err := memport.NewPair(c)
		if err != nil {
			t.Fatalf("NewPair(%+v) = %v", c, err)
		}
		return pa, pb
	}
}

// frames is the number of frames of the accounting test: 10^6 as the issue
// asks, fewer under -short and -race.
func frames() int {
	if raceEnabled {
		return 20_000
	}
	if testing.Short() {
		return 100_000
	}
	return 1_000_000
}

func TestConformance(t *testing.T) {
	t.Run("SeparatePools", func(t *testing.T) {
		dataplanetest.Run(t, newPairFunc(memport.Config{}), dataplanetest.Options{Frames: frames()})
	})
	t.Run("SharedPool", func(t *testing.T) {
		dataplanetest.Run(t, newPairFunc(memport.Config{SharedPool: true}), dataplanetest.Options{Frames: frames()})
	})
	t.Run("SmallRings", func(t *testing.T) {
		dataplanetest.Run(t, newPairFunc(memport.Config{RingSize: 8, FrameSize: 2048}),
			dataplanetest.Options{Frames: frames() / 50, Queues: []int{1, 3}})
	})
}
