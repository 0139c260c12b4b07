package afxdp

import (
	"testing"
)

func TestOpenClose(t *testing.T) {
	p := newVethPair(t, 1)
	port := openIn(t, p.b, p.v.B, Config{Filter: Filter{All: true}})
	t.Logf("native %v (%v), zerocopy %v, queues %d", port.NativeXDP(), port.NativeXDPError(), port.ZeroCopy(), port.NumQueues())
	if err := port.Close(); err != nil {
		t.Fatal(err)
	}
}
