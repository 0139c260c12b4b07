package memport_test

import (
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
)

// FuzzDescriptor puts an arbitrary descriptor on a ring (through the
// CorruptNextDescriptor hook) between two good frames: Receive must never
// panic, must deliver only frames inside the pool with at least MinHeadroom
// and a length in [14, MTU+18], and must count what it drops.
func FuzzDescriptor(f *testing.F) {
	if frameCheck {
		// A descriptor that names another buffer has it received
		// and freed twice, which the hook allows and the check
		// panics on.
		f.Skip("built with wgpio_framecheck: the corrupt descriptors free buffers twice")
	}
	f.Add(uint64(256), uint32(64))                // a valid descriptor at chunk 0
	f.Add(uint64(4096+100), uint32(64))           // too little headroom
	f.Add(memport.SameAddr, uint32(0))            // empty frame
	f.Add(memport.SameAddr, uint32(13))           // runt
	f.Add(memport.SameAddr, uint32(1515))         // one byte too long
	f.Add(memport.SameAddr, uint32(4096))         // past the chunk
	f.Add(uint64(1)<<40, uint32(64))              // past the pool
	f.Add(^uint64(0)-100, ^uint32(0))             // wraps
	f.Add(uint64(4096*4096-64), uint32(64))       // last bytes of the pool
	f.Add(uint64(4096*4096-64+1), uint32(64))     // crosses the pool's end
	f.Add(uint64(3*4096+256), uint32(4096-256+1)) // crosses a chunk
	a, b, err := memport.NewPair(memport.Config{PoolFrames: 4096})
	if err != nil {
		f.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	tx, rx := a.Queue(0).TX(), b.Queue(0).RX()
	frames := make([]dataplane.Frame, 3)
	buf := make([]dataplane.Frame, 8)
	f.Fuzz(func(t *testing.T, addr uint64, length uint32) {
		if n := tx.Alloc(frames); n != 3 {
			// The pool ran dry: an earlier input named a buffer twice,
			// which the hook allows. Nothing to check.
			tx.Free(frames[:n])
			return
		}
		for i := range frames {
			udpFrame(&frames[i], uint16(i), 64)
		}
		a.CorruptNextDescriptor(0, addr, length)
		if n := tx.Transmit(frames); n != 3 {
			t.Fatalf("Transmit = %d, want 3", n)
		}
		before := b.Stats()
		n := rx.Receive(buf)
		after := b.Stats()
		var drops uint64
		for r := range after.Drops {
			drops += after.Drops[r] - before.Drops[r]
		}
		if uint64(n)+drops != 3 {
			t.Errorf("received %d and dropped %d of 3 descriptors", n, drops)
		}
		for i := range n {
			fr := &buf[i]
			if fr.Pool() != b.Pool() || fr.Headroom() < dataplane.MinHeadroom || fr.Len() < 14 || fr.Len() > 1518 ||
				!b.Pool().Valid(fr.Addr(), uint32(fr.Len())) {
				t.Errorf("received a bad frame: addr %#x len %d headroom %d", fr.Addr(), fr.Len(), fr.Headroom())
			}
		}
		rx.Free(buf[:n])
	})
}
