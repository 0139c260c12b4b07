package arp

import "runtime"

// runtimeMem is the live heap after a collection.
type runtimeMem struct{ heap uint64 }

func (m *runtimeMem) read() {
	runtime.GC()
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.heap = s.HeapAlloc
}
