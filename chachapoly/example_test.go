package chachapoly_test

import (
	"crypto/rand"
	"fmt"

	"github.com/wgpio/wgpio/chachapoly"
)

// Seal a burst of two packets under one key, then open it; a packet whose
// tag is damaged fails alone.
func Example() {
	var key [chachapoly.KeySize]byte // from the handshake, in real use
	rand.Read(key[:])                // (the all-zero key is refused)
	var k chachapoly.Key
	k.Set(&key)
	defer k.Zero() // when the keypair is discarded

	msgs := []string{"first packet", "second packet"}
	pkts := make([]chachapoly.Packet, len(msgs))
	for i, m := range msgs {
		data := make([]byte, len(m)+chachapoly.TagSize) // message, then room for the tag
		copy(data, m)
		pkts[i] = chachapoly.Packet{Key: &k, Counter: uint64(i), Data: data}
	}
	chachapoly.Seal(pkts)

	pkts[1].Data[len(pkts[1].Data)-1] ^= 1 // damage the second tag
	ok := make([]bool, len(pkts))
	failed := chachapoly.Open(pkts, ok)
	n := len(pkts[0].Data) - chachapoly.TagSize
	fmt.Println(failed, ok, string(pkts[0].Data[:n]))
	// Output: 1 [true false] first packet
}
