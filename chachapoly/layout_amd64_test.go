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
		{"ctr", unsafe.Offsetof(g.ctr), 960},
		{"rel", unsafe.Offsetof(g.rel), 1024},
		{"polyKey", unsafe.Offsetof(g.polyKey), offPolyKey},
		{"keyOf", unsafe.Offsetof(g.keyOf), 3200},
		{"Key.w", unsafe.Offsetof(Key{}.w), 0},
	} {
		if c.got != c.want {
			t.Errorf("offset of group.%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

// TestPolyGroupLayout checks the offsets of polyGroup hard-coded in _asm.
func TestPolyGroupLayout(t *testing.T) {
	var g polyGroup
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"r", unsafe.Offsetof(g.r), 0},
		{"s", unsafe.Offsetof(g.s), 384},
		{"h", unsafe.Offsetof(g.h), 640},
		{"msg", unsafe.Offsetof(g.msg), 1024},
		{"full", unsafe.Offsetof(g.full), 1152},
		{"total", unsafe.Offsetof(g.total), 1280},
		{"tailOff", unsafe.Offsetof(g.tailOff), 1408},
		{"tail", unsafe.Offsetof(g.tail), offPolyTail},
		{"add", unsafe.Offsetof(g.add), 2048},
		{"out", unsafe.Offsetof(g.out), 2304},
		{"keyIdx", unsafe.Offsetof(g.keyIdx), 2560},
	} {
		if c.got != c.want {
			t.Errorf("offset of polyGroup.%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

// TestPoly8GroupLayout checks the offsets of poly8Group hard-coded in _asm.
func TestPoly8GroupLayout(t *testing.T) {
	var g poly8Group
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"r", unsafe.Offsetof(g.r), 0},
		{"s", unsafe.Offsetof(g.s), 320},
		{"h", unsafe.Offsetof(g.h), 576},
		{"msg", unsafe.Offsetof(g.msg), 896},
		{"start", unsafe.Offsetof(g.start), 960},
		{"fullEnd", unsafe.Offsetof(g.fullEnd), 1024},
		{"tailRel", unsafe.Offsetof(g.tailRel), 1088},
		{"tail", unsafe.Offsetof(g.tail), offPoly8Tail},
	} {
		if c.got != c.want {
			t.Errorf("offset of poly8Group.%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}
