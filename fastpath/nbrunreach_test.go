package fastpath

import (
	"slices"
	"testing"
	"time"

	"github.com/wgpio/wgpio/header"
)

// TestNeighbourFailureAnswered: a decrypted packet whose LAN next hop
// never answers is dropped (no_neighbour) after neighbourWaitMax and
// answered into the tunnel with "host unreachable" (IPv4, type 3 code 1)
// or "address unreachable" (IPv6, type 1 code 3), quoting it, as Linux's
// neighbour layer answers the packets it queued when resolution fails.
// Before, the sender got no answer at all.
func TestNeighbourFailureAnswered(t *testing.T) {
	r := newRig(t, rigConfig{})
	orderRig{r, t}.unresolve()
	wb := r.b.workers[0]
	atB, atA := through(t, r,
		ttlFrame(t, r, hostAddrA, hostAddrB, 100, 64, 0, true),
		ttlFrame(t, r, host6A, host6B, 100, 64, 0, true))
	if len(atB) != 0 || len(atA) != 0 || len(wb.nbrWait) != 2 {
		t.Fatalf("unresolved: %d frames at hostB, %d at hostA, %d waiting; want 0, 0, 2", len(atB), len(atA), len(wb.nbrWait))
	}
	// Not yet: a wait shorter than neighbourWaitMax is answered by nothing.
	wb.nbrTried = time.Time{}
	wb.flushNeighbourWait(r.clock.Now())
	if _, atA = through(t, r); len(atA) != 0 || len(wb.nbrWait) != 2 {
		t.Fatalf("before the wait's end: %d frames at hostA, %d waiting; want 0, 2", len(atA), len(wb.nbrWait))
	}
	before := r.b.Stats()[0]
	for i := range wb.nbrWait {
		wb.nbrWait[i].since = time.Now().Add(-neighbourWaitMax - time.Second)
	}
	wb.nbrTried = time.Time{}
	wb.flushNeighbourWait(r.clock.Now())
	atB, atA = through(t, r)
	if len(atB) != 0 || len(wb.nbrWait) != 0 {
		t.Errorf("after the wait: %d frames at hostB, %d waiting; want 0, 0", len(atB), len(wb.nbrWait))
	}
	type answer struct {
		typ, code uint8
		to        string
		quoted    string // the quoted packet's destination
	}
	var got []answer
	for _, d := range atA {
		var p header.Packet
		if header.Parse(d, &p) != header.OK {
			t.Fatalf("hostA got an unparsable frame %x", d)
		}
		var q header.Packet // the quoted packet, after the ICMP header
		header.ParseL3(d[p.L4Off+8:], &q)
		got = append(got, answer{d[p.L4Off], d[p.L4Off+1], p.Dst.String(), q.Dst.String()})
	}
	want := []answer{
		{3, 1, hostAddrA.String(), hostAddrB.String()},
		{1, 3, host6A.String(), host6B.String()},
	}
	if !slices.Equal(got, want) {
		t.Errorf("hostA got %+v, want %+v", got, want)
	}
	s := r.b.Stats()[0]
	if d := s.Drops[DropNoNeighbour] - before.Drops[DropNoNeighbour]; d != 2 {
		t.Errorf("no_neighbour went up by %d, want 2", d)
	}
	if n := s.ICMPSent - before.ICMPSent; n != 2 {
		t.Errorf("icmp sent went up by %d, want 2", n)
	}
	checkNbrCount(t, wb)
}
