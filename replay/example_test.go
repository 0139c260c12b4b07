package replay_test

import (
	"fmt"

	"github.com/wgpio/wgpio/protocol"
	"github.com/wgpio/wgpio/replay"
)

// A receive worker checks the counters of a whole batch once the AEAD has
// authenticated each packet, and drops the rejected ones (counting them as
// replays). One SharedWindow serves every queue that decrypts the keypair.
func ExampleSharedWindow_CheckBatch() {
	var window replay.SharedWindow // one per keypair, zero value ready

	// Counters of the packets whose Open succeeded, in arrival order; the
	// buffers belong to the worker and are reused for every batch.
	counters := []uint64{0, 1, 3, 2, 3, 200000, 4} // 3 repeated; 4 too old
	accepted := make([]bool, len(counters))

	n := window.CheckBatch(counters, protocol.RejectAfterMessages, accepted)
	fmt.Println(n, accepted)
	// Output: 5 [true true true true false true false]
}
