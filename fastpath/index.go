package fastpath

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
)

// Sizes of the index table: it starts at 2^IndexTableBits slots and doubles,
// up to 2^MaxIndexTableBits, whenever it is three quarters full.
const (
	// IndexTableBits is the table's initial size, 2^IndexTableBits slots
	// (4,096: 64 KiB).
	IndexTableBits = 12
	// MaxIndexTableBits bounds its growth: 2^22 slots (64 MiB) hold over
	// 3 million indexes, three for each of a million peers.
	MaxIndexTableBits = 22
)

// ErrIndexTableFull is returned by Allocate when no slot is free.
var ErrIndexTableFull = errors.New("fastpath: receiver index table full")

// IndexTable maps our receiver indexes (whitepaper §5.4.2: "sender index",
// 32 random bits chosen by us) to keypairs, for the workers, without a lock:
// an index's slot is its low bits, and a slot holds an atomic pointer to the
// keypair plus the full index to compare.
//
// The slots are an array behind an atomic pointer. Allocate doubles it when
// three quarters of it are in use: the writer copies every entry into the
// new array (an index's slot there is its low bits + 1, so indexes that were
// apart stay apart) and publishes it; the old array is never written again.
// A Lookup that loaded the old array just before sees it as it was at the
// swap, as if it had run a moment earlier.
//
// Allocate, Publish and Free are for the control plane and serialise on a
// mutex; Lookup is for workers, lock-free, and safe concurrently with them.
// The zero value is an empty table ready to use.
type IndexTable struct {
	mu    sync.Mutex // serialises writers
	slots atomic.Pointer[[]indexSlot]
	used  atomic.Int64 // allocated indexes: written with mu held, read by anyone (Len)
}

type indexSlot struct {
	index atomic.Uint32
	inUse atomic.Bool // reserved by Allocate; guarded by mu for writes
	kp    atomic.Pointer[Keypair]
}

// table returns the slot array (made on first use by a writer; nil before,
// for Lookup).
func (t *IndexTable) table() []indexSlot {
	if p := t.slots.Load(); p != nil {
		return *p
	}
	return nil
}

// grow makes the table at least 2^IndexTableBits slots, and doubles it when
// it is three quarters full, up to 2^MaxIndexTableBits. t.mu is held.
func (t *IndexTable) grow() {
	old := t.table()
	if old != nil && (t.used.Load() < int64(len(old)*3/4) || len(old) >= 1<<MaxIndexTableBits) {
		return
	}
	n := 1 << IndexTableBits
	if old != nil {
		n = 2 * len(old)
	}
	slots := make([]indexSlot, n)
	for i := range old {
		s := &old[i]
		if !s.inUse.Load() {
			continue
		}
		idx := s.index.Load()
		d := &slots[int(idx)&(n-1)]
		d.index.Store(idx)
		d.inUse.Store(true)
		d.kp.Store(s.kp.Load())
	}
	t.slots.Store(&slots)
}

// Allocate reserves a fresh random receiver index whose slot is free and
// returns it. The index names no keypair until Publish.
func (t *IndexTable) Allocate() (uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.grow()
	slots := t.table()
	if t.used.Load() >= int64(len(slots)*3/4) {
		return 0, ErrIndexTableFull
	}
	var b [4]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		idx := binary.LittleEndian.Uint32(b[:])
		s := &slots[int(idx)&(len(slots)-1)]
		if s.inUse.Load() {
			continue
		}
		s.inUse.Store(true)
		s.kp.Store(nil)
		s.index.Store(idx)
		t.used.Add(1)
		return idx, nil
	}
}

// slot returns index's slot if index is allocated, else nil. t.mu is held.
func (t *IndexTable) slot(index uint32) *indexSlot {
	slots := t.table()
	if slots == nil {
		return nil
	}
	s := &slots[int(index)&(len(slots)-1)]
	if !s.inUse.Load() || s.index.Load() != index {
		return nil
	}
	return s
}

// Publish makes index (from Allocate) name kp for Lookup.
func (t *IndexTable) Publish(index uint32, kp *Keypair) {
	t.mu.Lock()
	if s := t.slot(index); s != nil {
		s.kp.Store(kp)
	}
	t.mu.Unlock()
}

// Free releases index; Lookup stops finding it at once.
func (t *IndexTable) Free(index uint32) {
	t.mu.Lock()
	if s := t.slot(index); s != nil {
		s.kp.Store(nil)
		s.inUse.Store(false)
		t.used.Add(-1)
	}
	t.mu.Unlock()
}

// Lookup returns the keypair published for index, or nil. Lock-free.
func (t *IndexTable) Lookup(index uint32) *Keypair {
	p := t.slots.Load()
	if p == nil {
		return nil
	}
	slots := *p
	kp := slots[int(index)&(len(slots)-1)].kp.Load()
	if kp == nil || kp.LocalIndex != index {
		return nil
	}
	return kp
}

// Len is the number of allocated indexes (sessions, and handshakes in
// flight). Lock-free: a worker reads it once per burst (inbound.go).
func (t *IndexTable) Len() int { return int(t.used.Load()) }

// Slots is the table's size in slots now (0 before the first Allocate).
func (t *IndexTable) Slots() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.table())
}
