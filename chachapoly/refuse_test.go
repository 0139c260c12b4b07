package chachapoly

import (
	"bytes"
	"testing"
)

// refused reports what f panicked with ("" if it did not).
func refused(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg, _ = r.(string)
			if msg == "" {
				msg = "a panic that is not a string"
			}
		}
	}()
	f()
	return ""
}

// TestZeroedKeyRefused: Seal and Open panic on a Key whose words are all
// zero (never Set, erased by Zero, Set to zeros), before they touch a
// packet: such a Key works as a key everyone knows (before, Seal sealed
// with it, a packet anyone can read, and Open accepted what anyone could
// forge with it).
func TestZeroedKeyRefused(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		var raw [KeySize]byte
		raw[0] = 1
		var set, erased, never, zero Key
		set.Set(&raw)
		erased.Set(&raw)
		erased.Zero()
		zero.Set(&[KeySize]byte{})
		const want = "chachapoly: packet's Key is all zeros: not Set, or erased by Zero"
		for _, k := range []*Key{&erased, &never, &zero} {
			pkts := []Packet{{Key: &set, Data: make([]byte, 64+TagSize)}, {Key: k, Data: make([]byte, 64+TagSize)}}
			if msg := refused(func() { Seal(pkts) }); msg != want {
				t.Errorf("Seal with a Key not set panicked with %q, want %q", msg, want)
			}
			if !bytes.Equal(pkts[0].Data, make([]byte, 64+TagSize)) {
				t.Errorf("Seal that panicked changed packet 0")
			}
			if msg := refused(func() { Open(pkts, make([]bool, 2)) }); msg != want {
				t.Errorf("Open with a Key not set panicked with %q, want %q", msg, want)
			}
		}
		set.Zero()
	})
}
