package fastpath

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
)

// IndexTableBits sets the table's size: 2^IndexTableBits slots. Each slot
// holds at most one receiver index; with three keypairs and one handshake
// per peer, 2^16 slots serve over 16,000 peers at a load under 1.
const IndexTableBits = 16

// ErrIndexTableFull is returned by Allocate when no slot is free.
var ErrIndexTableFull = errors.New("fastpath: receiver index table full")

// IndexTable maps our receiver indexes (whitepaper §5.4.2: "sender index",
// 32 random bits chosen by us) to keypairs, for the workers, without a lock:
// an index's slot is its low IndexTableBits bits, and a slot holds an atomic
// pointer to the keypair plus the full index to compare.
//
// Allocate, Publish and Free are for the control plane and serialise on a
// mutex; Lookup is for workers, lock-free, and safe concurrently with them.
type IndexTable struct {
	mu    sync.Mutex // serialises writers
	slots [1 << IndexTableBits]indexSlot
	used  int // guarded by mu
}

type indexSlot struct {
	index atomic.Uint32
	inUse atomic.Bool // reserved by Allocate; guarded by mu for writes
	kp    atomic.Pointer[Keypair]
}

// Allocate reserves a fresh random receiver index whose slot is free and
// returns it. The index names no keypair until Publish.
func (t *IndexTable) Allocate() (uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.used >= len(t.slots)*3/4 {
		return 0, ErrIndexTableFull
	}
	var b [4]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		idx := binary.LittleEndian.Uint32(b[:])
		s := &t.slots[idx&(1<<IndexTableBits-1)]
		if s.inUse.Load() {
			continue
		}
		s.inUse.Store(true)
		s.kp.Store(nil)
		s.index.Store(idx)
		t.used++
		return idx, nil
	}
}

// Publish makes index (from Allocate) name kp for Lookup.
func (t *IndexTable) Publish(index uint32, kp *Keypair) {
	t.mu.Lock()
	s := &t.slots[index&(1<<IndexTableBits-1)]
	if s.inUse.Load() && s.index.Load() == index {
		s.kp.Store(kp)
	}
	t.mu.Unlock()
}

// Free releases index; Lookup stops finding it at once.
func (t *IndexTable) Free(index uint32) {
	t.mu.Lock()
	s := &t.slots[index&(1<<IndexTableBits-1)]
	if s.inUse.Load() && s.index.Load() == index {
		s.kp.Store(nil)
		s.inUse.Store(false)
		t.used--
	}
	t.mu.Unlock()
}

// Lookup returns the keypair published for index, or nil. Lock-free.
func (t *IndexTable) Lookup(index uint32) *Keypair {
	s := &t.slots[index&(1<<IndexTableBits-1)]
	kp := s.kp.Load()
	if kp == nil || kp.LocalIndex != index {
		return nil
	}
	return kp
}

// Len is the number of allocated indexes.
func (t *IndexTable) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.used
}
