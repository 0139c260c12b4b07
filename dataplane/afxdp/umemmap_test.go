//go:build linux

package afxdp

import (
	"errors"
	"runtime"
	"testing"
)

// TestMappedUMEM: a mapped UMEM's memory is outside the Go heap (the heap
// does not grow by it), its frames are usable, Free refuses while a
// socket uses it and unmaps it after, once, and a port cannot be opened on
// it then.
func TestMappedUMEM(t *testing.T) {
	const frames = 16384 // 64 MiB
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	u, err := NewUMEM(UMEMConfig{NumFrames: frames, Mapped: true})
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > frames*4096/8 {
		t.Errorf("the Go heap grew by %d bytes for a mapped UMEM of %d", grew, frames*4096)
	}
	if len(u.mem) != frames*4096 || len(u.mem)%4096 != 0 {
		t.Fatalf("memory of %d bytes, want %d", len(u.mem), frames*4096)
	}
	u.mem[0], u.mem[len(u.mem)-1] = 1, 2 // writable, both ends
	u.live[&socket{}] = true
	if err := u.Free(); !errors.Is(err, ErrUMEMInUse) {
		t.Errorf("Free with a socket live = %v, want ErrUMEMInUse", err)
	}
	clear(u.live)
	if err := u.Free(); err != nil {
		t.Fatalf("Free: %v", err)
	}
	if err := u.Free(); err != nil {
		t.Errorf("second Free: %v", err)
	}
	if _, err := u.socket(1, 0, ringSizes{}); !errors.Is(err, errUMEMFreed) {
		t.Errorf("a socket after Free: %v, want errUMEMFreed", err)
	}
}
