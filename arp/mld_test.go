package arp

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

// mldReportWire is an MLDv2 report from 02:00:00:00:00:01 and :: with one
// CHANGE_TO_EXCLUDE record (no sources) for ff02::1:ff00:1, laid out by
// hand from RFC 3810 §5.2 and RFC 2711 §2.1; its checksum 0x6f89 summed by
// hand over the RFC 8200 §8.1 pseudo-header (:: → ff02::16, length 28,
// next header 58): ff02+0016+001c+003a + 8f00+0001+0400+ff02+0001+ff00+0001
// = 0x39073, folded 0x9076, complemented 0x6f89.
const mldReportWire = `
333300000016 020000000001 86dd
60000000 0024 00 01
00000000000000000000000000000000
ff020000000000000000000000000016
3a00 0502 0000 0100
8f00 6f89 0000 0001
04 00 0000 ff02 0000 0000 0000 0000 0001 ff00 0001`

func TestMarshalMLDv2ReportKnownAnswer(t *testing.T) {
	want := unhex(t, mldReportWire)
	b := make([]byte, 200)
	n, err := MarshalMLDv2Report(b, macA, netip.IPv6Unspecified(), MLDChangeToExclude, []netip.Addr{snmA})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[:n], want) {
		t.Fatalf("report\n got %x\nwant %x", b[:n], want)
	}
	// x/net reads the ICMPv6 message as an MLDv2 report.
	m, err := icmp.ParseMessage(58, b[mldICMPOffset:n])
	if err != nil || m.Type != ipv6.ICMPTypeVersion2MulticastListenerReport {
		t.Errorf("x/net/icmp: %v, %v", m, err)
	}
}

// TestMarshalMLDChecksums checks the other builders' checksums with
// slowChecksum, independent of header.Checksum, and their layout.
func TestMarshalMLDChecksums(t *testing.T) {
	ll := netip.MustParseAddr("fe80::1")
	g2 := netip.MustParseAddr("ff02::1:ffab:cdef")
	pseudo := func(src, dst netip.Addr, l int) []byte {
		s, d := src.As16(), dst.As16()
		return append(append(append([]byte{}, s[:]...), d[:]...), 0, 0, byte(l>>8), byte(l), 0, 0, 0, 58)
	}
	b := make([]byte, 200)
	for _, tt := range []struct {
		name     string
		build    func() (int, error)
		dst      netip.Addr
		dmac     MAC
		wantSum  uint16 // computed independently (Python, RFC 1071)
		wantType byte
	}{
		{"v2 two groups", func() (int, error) {
			return MarshalMLDv2Report(b, macA, ll, MLDModeIsExclude, []netip.Addr{snmA, g2})
		}, allMLDv2Routers, MAC{0x33, 0x33, 0, 0, 0, 0x16}, 0xa452, 143},
		{"v1 report", func() (int, error) { return MarshalMLDv1(b, macA, netip.IPv6Unspecified(), ICMPv6MLDv1Report, snmA) },
			snmA, macSNA, 0x80a1, 131},
		{"v1 done", func() (int, error) { return MarshalMLDv1(b, macA, netip.IPv6Unspecified(), ICMPv6MLDv1Done, snmA) },
			allRouters, MAC{0x33, 0x33, 0, 0, 0, 2}, 0x7ea2, 132},
	} {
		clear(b)
		n, err := tt.build()
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		f := b[:n]
		src := netip.AddrFrom16([16]byte(f[22:38]))
		ic := f[mldICMPOffset:]
		if MAC(f[0:6]) != tt.dmac || MAC(f[6:12]) != macA || f[20] != 0 || f[21] != 1 ||
			netip.AddrFrom16([16]byte(f[38:54])) != tt.dst || !bytes.Equal(f[54:62], []byte{58, 0, 5, 2, 0, 0, 1, 0}) ||
			int(binary.BigEndian.Uint16(f[18:20])) != n-54 || ic[0] != tt.wantType {
			t.Errorf("%s: headers wrong: %x", tt.name, f)
		}
		if got := binary.BigEndian.Uint16(ic[2:4]); got != tt.wantSum || slowChecksum(pseudo(src, tt.dst, len(ic)), ic) != 0 {
			t.Errorf("%s: checksum %#04x, want %#04x", tt.name, got, tt.wantSum)
		}
	}
	if _, err := MarshalMLDv2Report(b, macA, ll, MLDModeIsExclude, []netip.Addr{ip6A}); err == nil {
		t.Error("a unicast group was accepted")
	}
	if _, err := MarshalMLDv2Report(b[:80], macA, ll, MLDModeIsExclude, []netip.Addr{snmA}); err != ErrShortBuffer {
		t.Errorf("short buffer: %v", err)
	}
}

// rawMLDQuery builds a query frame byte by byte (RFC 3810 §5.1; with
// v1, RFC 2710 §3's 24 bytes), its checksum from slowChecksum.
func rawMLDQuery(src, dst, group netip.Addr, hop byte, code uint16, v1 bool, sources ...netip.Addr) []byte {
	s, d, g := src.As16(), dst.As16(), group.As16()
	ic := []byte{130, 0, 0, 0, byte(code >> 8), byte(code), 0, 0}
	ic = append(ic, g[:]...)
	if !v1 {
		ic = append(ic, 2, 125, 0, byte(len(sources)))
		for _, a := range sources {
			b := a.As16()
			ic = append(ic, b[:]...)
		}
	}
	l := len(ic)
	pseudo := append(append(append([]byte{}, s[:]...), d[:]...), 0, 0, byte(l>>8), byte(l), 0, 0, 0, 58)
	ck := slowChecksum(pseudo, ic)
	ic[2], ic[3] = byte(ck>>8), byte(ck)
	dm := MulticastMAC(dst)
	f := append(append([]byte{}, dm[:]...), macB[:]...)
	f = append(f, 0x86, 0xdd, 0x60, 0, 0, 0, byte((l+8)>>8), byte(l+8), 0, hop)
	f = append(f, s[:]...)
	f = append(f, d[:]...)
	f = append(f, 58, 0, 5, 2, 0, 0, 1, 0)
	return append(f, ic...)
}

func TestParseMLDQuery(t *testing.T) {
	ll := netip.MustParseAddr("fe80::99")
	any6 := netip.IPv6Unspecified()
	for _, tt := range []struct {
		name  string
		frame []byte
		want  MLDQuery
		rs    Reason
	}{
		{"v2 general", rawMLDQuery(ll, allNodes, any6, 1, 10000, false), MLDQuery{Version: 2, MaxDelay: 10 * time.Second, Group: any6}, ReasonNone},
		// 0x8fff: exponent 0, mantissa 0xfff: (0x1fff) << 3 ms.
		{"v2 float delay", rawMLDQuery(ll, snmA, snmA, 1, 0x8fff, false), MLDQuery{Version: 2, MaxDelay: 0x1fff << 3 * time.Millisecond, Group: snmA}, ReasonNone},
		{"v2 sources", rawMLDQuery(ll, snmA, snmA, 1, 1000, false, ip6B), MLDQuery{Version: 2, MaxDelay: time.Second, Group: snmA, Sources: 1}, ReasonNone},
		{"v1 general", rawMLDQuery(ll, allNodes, any6, 1, 500, true), MLDQuery{Version: 1, MaxDelay: 500 * time.Millisecond, Group: any6}, ReasonNone},
		{"hop limit", rawMLDQuery(ll, allNodes, any6, 2, 1000, false), MLDQuery{}, ReasonHopLimit},
		{"global source", rawMLDQuery(ip6B, allNodes, any6, 1, 1000, false), MLDQuery{}, ReasonMLDSource},
	} {
		q, rs := ParseMLDQuery(tt.frame)
		if rs != tt.rs {
			t.Errorf("%s: reason %v, want %v", tt.name, rs, tt.rs)
			continue
		}
		if rs != ReasonNone {
			continue
		}
		if q.Version != tt.want.Version || q.MaxDelay != tt.want.MaxDelay || q.Group != tt.want.Group || q.Sources != tt.want.Sources || q.Src != ll {
			t.Errorf("%s: %+v, want %+v", tt.name, q, tt.want)
		}
	}
	bad := rawMLDQuery(ll, allNodes, any6, 1, 1000, false)
	bad[len(bad)-1] ^= 1
	if _, rs := ParseMLDQuery(bad); rs != ReasonChecksum {
		t.Errorf("corrupt query: %v, want checksum", rs)
	}
	// The Hop-by-Hop options: a query without the Router Alert for MLD
	// is dropped (RFC 3810 §6.2), as Linux drops it; one after padding
	// is found.
	for _, o := range []struct {
		name string
		opts [6]byte
		rs   Reason
	}{
		{"PadN alone", [6]byte{1, 4, 0, 0, 0, 0}, ReasonMLDRouterAlert},
		{"Router Alert for RSVP", [6]byte{5, 2, 0, 1, 1, 0}, ReasonMLDRouterAlert},
		{"Router Alert after Pad1s", [6]byte{0, 0, 5, 2, 0, 0}, ReasonNone},
		{"option past the header", [6]byte{1, 0, 1, 9, 0, 0}, ReasonMLDRouterAlert},
	} {
		f := rawMLDQuery(ll, allNodes, any6, 1, 1000, false)
		copy(f[EthernetHeaderLen+IPv6HeaderLen+2:], o.opts[:])
		if _, rs := ParseMLDQuery(f); rs != o.rs {
			t.Errorf("query with options %x (%s): %v, want %v", o.opts, o.name, rs, o.rs)
		}
	}
	rep := unhex(t, mldReportWire)
	if _, rs := ParseMLDQuery(rep); rs != ReasonNotNeighbour {
		t.Errorf("a report: %v, want not-neighbour", rs)
	}
}

// frameLog collects the frames an MLDHost sends.
type frameLog struct {
	mu     sync.Mutex
	frames [][]byte
	at     []time.Time
}

func (l *frameLog) send(f []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frames = append(l.frames, bytes.Clone(f))
	l.at = append(l.at, time.Now())
	return nil
}

func (l *frameLog) get() ([][]byte, []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]byte(nil), l.frames...), append([]time.Time(nil), l.at...)
}

// recordTypes returns the ICMP type and record types of an MLD frame.
func recordTypes(f []byte) (typ byte, recs []byte) {
	ic := f[mldICMPOffset:]
	if ic[0] != ICMPv6MLDv2Report {
		return ic[0], nil
	}
	for i := range int(binary.BigEndian.Uint16(ic[6:8])) {
		recs = append(recs, ic[mldv2HeaderLen+i*mldv2RecordLen])
	}
	return ic[0], recs
}

// TestMLDHost runs a host through its life: two unsolicited
// CHANGE_TO_EXCLUDE reports within 1 s, a MODE_IS_EXCLUDE report after a
// General Query within its delay (and none for another group's query),
// MLDv1 reports after an MLDv1 query, and a Done at Close (v1 mode).
func TestMLDHost(t *testing.T) {
	var log frameLog
	h, err := NewMLDHost(MLDHostConfig{MAC: macA, Groups: []netip.Addr{snmA}, Send: log.send})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	h.Start()
	defer h.Close()
	wait := func(n int, within time.Duration) [][]byte {
		t.Helper()
		for d := time.Now().Add(within); ; time.Sleep(5 * time.Millisecond) {
			if f, _ := log.get(); len(f) >= n {
				return f
			}
			if time.Now().After(d) {
				f, _ := log.get()
				t.Fatalf("%d frames within %v, want %d", len(f), within, n)
			}
		}
	}
	f := wait(2, 2*time.Second)
	_, at := log.get()
	if at[1].Sub(start) > 1100*time.Millisecond {
		t.Errorf("second unsolicited report after %v, want within 1 s", at[1].Sub(start))
	}
	for i := range 2 {
		if typ, recs := recordTypes(f[i]); typ != ICMPv6MLDv2Report || !bytes.Equal(recs, []byte{MLDChangeToExclude}) {
			t.Errorf("unsolicited report %d: type %d records %v", i, typ, recs)
		}
	}
	ll := netip.MustParseAddr("fe80::99")
	if h.Query(MLDQuery{Version: 2, Src: ll, Group: netip.MustParseAddr("ff02::1:ff00:2"), MaxDelay: time.Millisecond}) {
		t.Error("a query for another group was taken")
	}
	h.Query(MLDQuery{Version: 2, Src: ll, Group: netip.IPv6Unspecified(), MaxDelay: 200 * time.Millisecond})
	f = wait(3, time.Second)
	if typ, recs := recordTypes(f[2]); typ != ICMPv6MLDv2Report || !bytes.Equal(recs, []byte{MLDModeIsExclude}) {
		t.Errorf("answer to a general query: type %d records %v", typ, recs)
	}
	h.Query(MLDQuery{Version: 1, Src: ll, Group: netip.IPv6Unspecified(), MaxDelay: 100 * time.Millisecond})
	f = wait(4, time.Second)
	if typ, _ := recordTypes(f[3]); typ != ICMPv6MLDv1Report || netip.AddrFrom16([16]byte(f[3][38:54])) != snmA {
		t.Errorf("answer to an MLDv1 query: type %d to %x", typ, f[3][38:54])
	}
	h.Close()
	f, _ = log.get()
	if len(f) != 5 {
		t.Fatalf("%d frames after Close, want 5", len(f))
	}
	if typ, _ := recordTypes(f[4]); typ != ICMPv6MLDv1Done {
		t.Errorf("leave in MLDv1 mode: type %d, want Done", typ)
	}
	if s := h.Stats(); s.Queries != 2 || s.Reports != 5 {
		t.Errorf("stats %+v, want 2 queries, 5 reports", s)
	}
}

// TestMLDHostLeaveV2 checks the MLDv2 leave: CHANGE_TO_INCLUDE, no
// sources.
func TestMLDHostLeaveV2(t *testing.T) {
	var log frameLog
	h, err := NewMLDHost(MLDHostConfig{MAC: macA, Groups: []netip.Addr{snmA}, Send: log.send})
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	h.Close()
	f, _ := log.get()
	if typ, recs := recordTypes(f[len(f)-1]); typ != ICMPv6MLDv2Report || !bytes.Equal(recs, []byte{MLDChangeToInclude}) {
		t.Errorf("leave: type %d records %v", typ, recs)
	}
}

// TestResponderMLDQuery: a query reaches the responder's MLDHost, and is
// counted as used; one from a global source is dropped as mld-source;
// without a host, a query is not-for-us.
func TestResponderMLDQuery(t *testing.T) {
	ll := netip.MustParseAddr("fe80::99")
	r := newTestResponder(t, nil, true)
	q := rawMLDQuery(ll, allNodes, netip.IPv6Unspecified(), 1, 1000, false)
	var out [NDPFrameLen]byte
	if _, rs := r.Handle(q, out[:]); rs != ReasonNotForUs || r.Drops(ReasonNotForUs) != 1 {
		t.Errorf("query without MLD host: %v", rs)
	}
	var log frameLog
	h, err := NewMLDHost(MLDHostConfig{MAC: macA, Groups: r.SolicitedNodeGroups(), Send: log.send})
	if err != nil {
		t.Fatal(err)
	}
	r.SetMLD(h)
	if n, rs := r.Handle(q, out[:]); n != 0 || rs != ReasonNone || h.Stats().Queries != 1 {
		t.Errorf("query: %d, %v, host stats %+v", n, rs, h.Stats())
	}
	if _, rs := r.Handle(rawMLDQuery(ip6B, allNodes, netip.IPv6Unspecified(), 1, 1000, false), out[:]); rs != ReasonMLDSource || r.Drops(ReasonMLDSource) != 1 {
		t.Errorf("query from a global source: %v", rs)
	}
	allocs := testing.AllocsPerRun(1000, func() { r.Handle(q, out[:]) })
	if allocs != 0 {
		t.Errorf("Handle(MLD query) allocs = %v, want 0", allocs)
	}
}
