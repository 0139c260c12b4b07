//go:build linux

package sink

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/wgpio/wgpio/bench/internal/gen"
)

func payload(run, flow uint32, seq uint64) []byte {
	b := make([]byte, gen.PayloadLen)
	binary.BigEndian.PutUint32(b, gen.Magic)
	binary.BigEndian.PutUint32(b[4:], run)
	binary.BigEndian.PutUint32(b[8:], flow)
	binary.BigEndian.PutUint64(b[16:], seq)
	return b
}

func TestCount(t *testing.T) {
	type pkt struct {
		run, flow uint32
		seq       uint64
	}
	for _, tc := range []struct {
		name string
		in   []pkt
		want Counts
	}{
		{"in order", []pkt{{1, 0, 0}, {1, 0, 1}, {1, 1, 0}}, Counts{Run: 1, Received: 3, PerFlow: []uint64{2, 1}}},
		{"one late", []pkt{{1, 0, 0}, {1, 0, 2}, {1, 0, 1}}, Counts{Run: 1, Received: 3, Reordered: 1, PerFlow: []uint64{3, 0}}},
		{"duplicate", []pkt{{1, 0, 0}, {1, 0, 0}, {1, 0, 2}, {1, 0, 1}, {1, 0, 1}}, Counts{Run: 1, Received: 3, Reordered: 1, Duplicates: 2, PerFlow: []uint64{3, 0}}},
		{"loss", []pkt{{1, 1, 0}, {1, 1, 5}}, Counts{Run: 1, Received: 2, PerFlow: []uint64{0, 2}}},
		{"stale run", []pkt{{0, 0, 0}, {1, 0, 0}}, Counts{Run: 1, Received: 1, Stale: 1, PerFlow: []uint64{1, 0}}},
		{"flow out of range", []pkt{{1, 9, 0}}, Counts{Run: 1, Stale: 1, PerFlow: []uint64{0, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &UDP{}
			s.Start(1, 2)
			for _, p := range tc.in {
				s.count(payload(p.run, p.flow, p.seq))
			}
			s.count([]byte("not a bench packet"))
			tc.want.Foreign = 1
			if diff := cmp.Diff(tc.want, s.Counts()); diff != "" {
				t.Errorf("Counts() (-want +got):\n%s", diff)
			}
		})
	}
}

// An excerpt of /proc/net/snmp from Linux 6.x.
const snmpText = `Ip: Forwarding DefaultTTL InReceives
Ip: 1 64 1234
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 1000 2 30 40 25 0 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
`

func TestParseSNMP(t *testing.T) {
	got, err := ParseSNMP(snmpText)
	want := SNMP{InDatagrams: 1000, NoPorts: 2, InErrors: 30, RcvbufErrors: 25}
	if err != nil || got != want {
		t.Errorf("ParseSNMP = %+v, %v; want %+v", got, err, want)
	}
	if _, err := ParseSNMP("Ip: a\nIp: 1\n"); err == nil {
		t.Errorf("ParseSNMP(no Udp) = nil error, want one")
	}
}

// TestUDPLoopback sends bench packets to a sink on loopback.
func TestUDPLoopback(t *testing.T) {
	s, err := ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Start(3, 1)
	c, err := net.DialUDP("udp4", nil, s.conn.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 10 {
		c.Write(payload(3, 0, uint64(i)))
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Counts().Received < 10 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := s.Counts(); got.Received != 10 || got.Reordered != 0 {
		t.Errorf("Counts() = %+v, want 10 received in order", got)
	}
}
