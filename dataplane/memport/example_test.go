package memport_test

import (
	"fmt"
	"log"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
)

// Example sends one frame from port a to port b of a pair and receives it.
// A frame longer than the MTU plus its Ethernet header fits a frame buffer,
// so SendCopy takes it without an error, but the transmitting queue drops it
// and counts it (too_long): a nil error means only that the frame was taken.
func Example() {
	a, b, err := memport.NewPair(memport.Config{}) // MTU 1500, one queue
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	scratch := make([]dataplane.Frame, 8)
	tx, rx := a.Queue(0).TX(), b.Queue(0).RX() // this goroutine owns both halves

	fmt.Println(dataplane.SendCopy(tx, scratch, make([]byte, 14+1500)))
	fmt.Println(dataplane.SendCopy(tx, scratch, make([]byte, 14+1501)))
	n := rx.Receive(scratch)
	fmt.Println("received", n, "of", scratch[0].Len(), "bytes")
	rx.Free(scratch[:n])
	fmt.Println("a dropped", a.Stats().Drops.List())
	// Output:
	// <nil>
	// <nil>
	// received 1 of 1514 bytes
	// a dropped [too_long=1]
}
