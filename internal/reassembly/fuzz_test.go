package reassembly

import (
	"bytes"
	"testing"
	"time"
)

// model is the reference the fuzz target compares a Reassembler with: the
// same rules (the package comment) written the plain way, a byte map per
// datagram, without the bounds the fuzz target never reaches.
type model struct {
	dgs   map[mkey]*mdg
	drops [NumDropReasons]uint64
}

type mkey struct {
	v6  bool
	key byte
}

type mdg struct {
	created       int64
	total, maxEnd int
	frags         int
	cov           [MaxDatagramLen]bool
	data          [MaxDatagramLen]byte
}

func (m *model) timeout(v6 bool) int64 {
	if v6 {
		return int64(DefaultTimeout6)
	}
	return int64(DefaultTimeout4)
}

func (m *model) kill(k mkey, why DropReason, extra int) {
	m.drops[why] += uint64(m.dgs[k].frags + extra)
	delete(m.dgs, k)
}

// add is Add for a fragment of datagram k at off with data, more set on
// all but the last; minFirst 8.
func (m *model) add(k mkey, off int, data []byte, more bool, now int64) ([]byte, int, bool) {
	n := len(data)
	if off == 0 && !more { // no fragment
		m.drops[DropBadHeader]++
		return nil, 0, false
	}
	if more {
		if k.v6 && n%8 != 0 {
			m.drops[DropBadHeader]++
			return nil, 0, false
		}
		n &^= 7
	}
	if n == 0 {
		m.drops[DropBadHeader]++
		return nil, 0, false
	}
	end := off + n
	hdr := 20
	if k.v6 {
		hdr = 0
	}
	if hdr+end > MaxDatagramLen {
		m.drops[DropTooBig]++
		return nil, 0, false
	}
	if off == 0 && n < 8 {
		m.drops[DropTinyFirst]++
		return nil, 0, false
	}
	d := m.dgs[k]
	if d != nil && now-d.created >= m.timeout(k.v6) {
		m.kill(k, DropTimeout, 0)
		d = nil
	}
	if d == nil {
		d = &mdg{created: now, total: -1}
		m.dgs[k] = d
	}
	if !more && (d.total >= 0 && d.total != end || end < d.maxEnd) || more && d.total >= 0 && end > d.total {
		m.kill(k, DropInconsistent, 1)
		return nil, 0, false
	}
	held := 0
	for i := off; i < end; i++ {
		if d.cov[i] {
			held++
		}
	}
	if held == n {
		m.drops[DropDuplicate]++
		return nil, 0, false
	}
	if held > 0 {
		m.kill(k, DropOverlap, 1)
		return nil, 0, false
	}
	runs := 0
	for i := range max(d.maxEnd, end) {
		in := d.cov[i] || i >= off && i < end
		if in && (i == 0 || !(d.cov[i-1] || i-1 >= off && i-1 < end)) {
			runs++
		}
	}
	if runs > MaxRuns {
		m.kill(k, DropTooManyHoles, 1)
		return nil, 0, false
	}
	for i := off; i < end; i++ {
		d.cov[i], d.data[i] = true, data[i-off]
	}
	d.frags++
	d.maxEnd = max(d.maxEnd, end)
	if !more {
		d.total = end
	}
	if d.total < 0 {
		return nil, 0, false
	}
	for i := range d.total {
		if !d.cov[i] {
			return nil, 0, false
		}
	}
	out := bytes.Clone(d.data[:d.total])
	fr := d.frags
	delete(m.dgs, k)
	return out, fr, true
}

func (m *model) expire(now int64) {
	for k, d := range m.dgs {
		if now-d.created >= m.timeout(k.v6) {
			m.kill(k, DropTimeout, 0)
		}
	}
}

// FuzzReassemble feeds a Reassembler and the model the same fragments
// (four bytes each from the input: family, M clear, one of three
// datagrams and the clock; the offset's low bits; its high bits; the length) and
// compares every datagram completed and the drops by reason; the input as
// a packet must not crash Add.
func FuzzReassemble(f *testing.F) {
	f.Add([]byte{0x00, 0, 0, 100, 0x04, 12, 0, 100})                                          // two fragments, IPv4
	f.Add([]byte{0x05, 0, 0, 48, 0x01, 6, 0, 48, 0x01, 3, 0, 40, 0x01, 3, 0, 16})             // IPv6, a duplicate
	f.Add([]byte{0x04, 0, 0, 16, 0x04, 1, 0, 8, 0x80, 0, 0, 0, 0x04, 2, 0, 8, 0x00, 0, 0, 8}) // overlap, expiry
	f.Add([]byte{0x04, 0xff, 0x1f, 200})                                                      // past 65,535
	f.Fuzz(func(t *testing.T, in []byte) {
		r := New(Config{MaxDatagrams: 8, MaxBytes: 1, MinFirst: 8})
		r.Add(in, 0) // any bytes: must not crash
		r.Add(bytes.Clone(in), int64(time.Hour))
		// 48 fragments at most, each in 2 pages at most: the arena of
		// 128 pages never fills (the model has no bound).
		in = in[:min(len(in), 4*48)]
		r = New(Config{MaxDatagrams: 8, MaxBytes: 128 * PageSize, MinFirst: 8})
		m := &model{dgs: map[mkey]*mdg{}}
		var now int64
		src := make([]byte, 256)
		for i := range src {
			src[i] = byte(i * 7)
		}
		for len(in) >= 4 {
			op := in[0]
			if op&0x80 != 0 { // the clock moves 31 s on: IPv4 datagrams time out
				now += int64(31 * time.Second)
				if op&0x40 != 0 {
					r.Expire(now)
					m.expire(now)
				}
			}
			k := mkey{v6: op&1 != 0, key: op >> 3 & 3 % 3}
			more := op&4 == 0
			off := (int(in[1]) | int(in[2]&0x1f)<<8) * 8
			data := src[:in[3]]
			fr := frag{v6: k.v6, id: uint32(k.key), off: off, more: more, data: data}
			want, wantN, wantOK := m.add(k, off, data, more, now)
			got, ok := r.Add(fr.build(), now)
			if ok != wantOK || ok && (!bytes.Equal(got.Data, want) || got.Fragments != wantN) {
				t.Fatalf("fragment %+v at %d: got %v (%d bytes, %d fragments), model %v (%d bytes, %d fragments)",
					fr, now, ok, len(got.Data), got.Fragments, wantOK, len(want), wantN)
			}
			in = in[4:]
		}
		s := r.Stats()
		for why := range NumDropReasons {
			if s.Drops[why] != m.drops[why] {
				t.Errorf("drops %v: %d, model %d", why, s.Drops[why], m.drops[why])
			}
		}
		if int(s.InProgress) != len(m.dgs) {
			t.Errorf("in progress %d, model %d", s.InProgress, len(m.dgs))
		}
	})
}
