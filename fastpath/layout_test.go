package fastpath

import (
	"testing"
	"unsafe"
)

// TestKeypairLayout checks that a Keypair is the three cache lines its
// doc describes: the send line (counter, index, the senders' state and the
// send key's words), the state line and the receive line, and that the allocator puts keypairs on
// 64-byte boundaries (the size class of keypairSize bytes does). A field
// added to Keypair must find room in its line (keypairPad and the pads).
func TestKeypairLayout(t *testing.T) {
	var kp Keypair
	if s := unsafe.Sizeof(kp); s != keypairSize {
		t.Fatalf("Keypair is %d bytes, want %d (adjust the pads)", s, keypairSize)
	}
	for _, f := range []struct {
		name     string
		off, end uintptr
		line     uintptr
	}{
		{"sendNonce", unsafe.Offsetof(kp.sendNonce), unsafe.Offsetof(kp.sendNonce) + 8, 0},
		{"RemoteIndex", unsafe.Offsetof(kp.RemoteIndex), unsafe.Offsetof(kp.RemoteIndex) + 4, 0},
		{"sendFlags", unsafe.Offsetof(kp.sendFlags), unsafe.Offsetof(kp.sendFlags) + 4, 0},
		{"serial", unsafe.Offsetof(kp.serial), unsafe.Offsetof(kp.serial) + 8, 0},
		{"sendUntil", unsafe.Offsetof(kp.sendUntil), unsafe.Offsetof(kp.sendUntil) + 8, 0},
		// The send key's words (what Seal reads in bursts); its AEAD
		// pointer, for long messages only, opens line 1.
		{"send.w", unsafe.Offsetof(kp.send), unsafe.Offsetof(kp.send) + 32, 0},
		{"Created", unsafe.Offsetof(kp.Created), unsafe.Offsetof(kp.Created) + 8, 1},
		{"confirmed", unsafe.Offsetof(kp.confirmed), unsafe.Offsetof(kp.confirmed) + 4, 1},
		{"dead", unsafe.Offsetof(kp.dead), unsafe.Offsetof(kp.dead) + 4, 1},
		{"LocalIndex", unsafe.Offsetof(kp.LocalIndex), unsafe.Offsetof(kp.LocalIndex) + 4, 1},
		{"Peer", unsafe.Offsetof(kp.Peer), unsafe.Offsetof(kp.Peer) + 8, 1},
		{"replay", unsafe.Offsetof(kp.replay), unsafe.Offsetof(kp.replay) + 8, 1},
		{"receive", unsafe.Offsetof(kp.receive), unsafe.Offsetof(kp.receive) + unsafe.Sizeof(kp.receive), 2},
	} {
		if f.off/64 != f.line || (f.end-1)/64 != f.line {
			t.Errorf("Keypair.%s at bytes %d-%d, not in line %d", f.name, f.off, f.end-1, f.line)
		}
	}
	keep := make([]*Keypair, 100)
	for i := range keep {
		keep[i], _ = NewKeypair(&[32]byte{1}, &[32]byte{2}, 1, 2, true, 0, nil)
		if a := uintptr(unsafe.Pointer(keep[i])); a%64 != 0 {
			t.Fatalf("keypair %d at %#x: not on a 64-byte boundary", i, a)
		}
	}
}

// TestPeerLocalLayout checks that outbound's per-peer state is where
// outbound.go (warm) expects it: all that pass 2 and wrap use of a peer
// whose outer headers the shared source writes (outersrc.go) in the first
// cache line of a peerLocal, the template of the others starting the
// second (its IPv4 part fits a line: TestUDPTemplateIPv4Line in package
// header), and peerLocals packed on line boundaries in their chunks.
func TestPeerLocalLayout(t *testing.T) {
	var pl peerLocal
	if s := unsafe.Sizeof(pl); s%64 != 0 {
		t.Fatalf("peerLocal is %d bytes, not a multiple of 64", s)
	}
	for _, f := range []struct {
		name     string
		off, end uintptr
		line     uintptr
	}{
		{"peer", unsafe.Offsetof(pl.peer), unsafe.Offsetof(pl.peer) + 8, 0},
		{"tmplEp", unsafe.Offsetof(pl.tmplEp), unsafe.Offsetof(pl.tmplEp) + 8, 0},
		{"nonce", unsafe.Offsetof(pl.nonce), unsafe.Offsetof(pl.nonce) + 8, 0},
		{"leaseOf", unsafe.Offsetof(pl.leaseOf), unsafe.Offsetof(pl.leaseOf) + 8, 0},
		{"sentAt", unsafe.Offsetof(pl.sentAt), unsafe.Offsetof(pl.sentAt) + 4, 0},
		{"dataSentAt", unsafe.Offsetof(pl.dataSentAt), unsafe.Offsetof(pl.dataSentAt) + 4, 0},
		{"txBytes", unsafe.Offsetof(pl.txBytes), unsafe.Offsetof(pl.txBytes) + 4, 0},
		{"dst", unsafe.Offsetof(pl.dst), unsafe.Offsetof(pl.dst) + unsafe.Sizeof(pl.dst), 0},
		{"batchN", unsafe.Offsetof(pl.batchN), unsafe.Offsetof(pl.batchN) + 2, 0},
		{"granted", unsafe.Offsetof(pl.granted), unsafe.Offsetof(pl.granted) + 2, 0},
		{"slot", unsafe.Offsetof(pl.slot), unsafe.Offsetof(pl.slot) + 2, 0},
		{"dirty", unsafe.Offsetof(pl.dirty), unsafe.Offsetof(pl.dirty) + 1, 0},
		{"srcGen", unsafe.Offsetof(pl.srcGen), unsafe.Offsetof(pl.srcGen) + 1, 0},
	} {
		if f.off/64 != f.line || (f.end-1)/64 != f.line {
			t.Errorf("peerLocal.%s at bytes %d-%d, not in line %d", f.name, f.off, f.end-1, f.line)
		}
	}
	if off := unsafe.Offsetof(pl.tmpl); off != 64 {
		t.Errorf("peerLocal.tmpl at byte %d, not at the start of line 1", off)
	}
	// The chunks the worker makes (peerState), not a slice of the test's
	// own: that one does not escape and lives on the goroutine's stack,
	// 16-byte aligned at best (under -race it never was on a line).
	var w worker
	for _, id := range []int{0, 1, localChunk - 1, localChunk, 3*localChunk + 5} {
		if a := uintptr(unsafe.Pointer(w.peerState(&Peer{ID: id}))); a%64 != 0 {
			t.Fatalf("peerLocal of peer %d at %#x: not on a 64-byte boundary", id, a)
		}
	}
}

// TestPeerLayout checks that the fields outbound reads for every peer of
// a burst (ID, ports, Current, Endpoint) are in the first 64 bytes of a
// Peer, and that Peers are allocated on 64-byte boundaries (peerSize).
func TestPeerLayout(t *testing.T) {
	var p Peer
	if s := unsafe.Sizeof(p); s != peerSize {
		t.Fatalf("Peer is %d bytes, want %d (adjust peerPad)", s, peerSize)
	}
	if end := unsafe.Offsetof(p.Endpoint) + 8; end > 64 || unsafe.Offsetof(p.ID) != 0 || unsafe.Offsetof(p.Current) > 56 {
		t.Errorf("Peer: ID at %d, Current at %d, Endpoint at %d: not all in the first line",
			unsafe.Offsetof(p.ID), unsafe.Offsetof(p.Current), unsafe.Offsetof(p.Endpoint))
	}
	keep := make([]*Peer, 100)
	for i := range keep {
		keep[i] = &Peer{ID: i}
		if a := uintptr(unsafe.Pointer(keep[i])); a%64 != 0 {
			t.Fatalf("peer %d at %#x: not on a 64-byte boundary", i, a)
		}
	}
}
