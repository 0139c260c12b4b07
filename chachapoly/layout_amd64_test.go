//go:build !purego

package chachapoly

import (
	"testing"
	"unsafe"
)

// TestGroupLayout checks the offsets that the generator in _asm hard-codes.
func TestGroupLayout(t *testing.T) {
	var g group
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"key", unsafe.Offsetof(g.key), 0},
		{"nonce", unsafe.Offsetof(g.nonce), 512},
		{"ptr", unsafe.Offsetof(g.ptr), 704},
		{"n", unsafe.Offsetof(g.n), 832},
		{"polyKey", unsafe.Offsetof(g.polyKey), 960},
	} {
		if c.got != c.want {
			t.Errorf("offset of group.%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}
