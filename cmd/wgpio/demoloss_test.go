//go:build linux

package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestLedgerNamesUncountedLoss(t *testing.T) {
	before := kernelDrops{udp: map[string]uint64{"gb RcvbufErrors": 3}, links: map[string]uint64{"gb links": 0}}
	after := kernelDrops{udp: map[string]uint64{"gb RcvbufErrors": 13}, links: map[string]uint64{"gb links": 0}}
	l := demoLedger{sentAB: 100, encrypted: 100, receivedAB: 90, sentBA: 100, decrypted: 70, receivedBA: 70, wgpio: "none"}
	l.kernel, l.kernelDetail = after.since(before)
	if l.kernel != 10 || l.kernelDetail != "gb RcvbufErrors=10" {
		t.Fatalf("since = %d %q, want 10 \"gb RcvbufErrors=10\"", l.kernel, l.kernelDetail)
	}
	var b bytes.Buffer
	l.write(&b)
	// 10 lost from wgpio to host B and 30 from host B to wgpio, 10 of
	// them counted by the kernel: 30 in the stock peer.
	if !strings.Contains(b.String(), "not counted: about 30 in the stock wireguard-go peer") {
		t.Fatalf("ledger:\n%s\nwant the 30 datagrams no counter explains", b.String())
	}
	// Each counter set is named before its list (it read "the kernel gb
	// RcvbufErrors=10").
	if want := "drops counted: by wgpio: none; by the kernel: gb RcvbufErrors=10\n"; !strings.Contains(b.String(), want) {
		t.Errorf("ledger:\n%s\nwant %q", b.String(), want)
	}
	l = demoLedger{sentAB: 5, encrypted: 5, receivedAB: 5, sentBA: 5, decrypted: 5, receivedBA: 5, wgpio: "none", kernelDetail: "none"}
	b.Reset()
	l.write(&b)
	if strings.Contains(b.String(), "not counted") {
		t.Fatalf("ledger of a run without loss:\n%s", b.String())
	}
}

// TestLedgerAgainstEndToEnd: the ledger weighs the drops counted against
// the datagrams lost end to end, so drops counted on wgpio's side (its
// LAN socket's, which the kernel counts at the veth in wgpio's namespace)
// neither hide an uncounted loss in the stock peer nor does a packet wgpio
// counted that was not the demo's (the ping the demo suggests) look like
// one.
func TestLedgerAgainstEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    demoLedger
		want string // "" for no "not counted" line
	}{
		// 25,622 lost at wgpio's LAN socket, counted by the kernel; 20,000
		// lost uncounted in the stock peer, host B to wgpio.
		{"hidden", demoLedger{sentAB: 200000, encrypted: 174378, receivedAB: 174378, sentBA: 200000, decrypted: 180000, receivedBA: 180000, kernel: 25622}, "not counted: about 20000 in the stock"},
		// The demo's first run: every loss counted (wgpio's namespace
		// 29,576, the stock peer's 61,475), two drops of the workers.
		{"all counted", demoLedger{sentAB: 200141, encrypted: 174519, receivedAB: 174519, sentBA: 199701, decrypted: 134272, receivedBA: 134272, kernel: 91051, workerDrops: 2}, ""},
		// No loss; two pings through the tunnel meanwhile.
		{"ping", demoLedger{sentAB: 24841, encrypted: 24843, receivedAB: 24841, sentBA: 24841, decrypted: 24843, receivedBA: 24841}, ""},
	} {
		var b bytes.Buffer
		tc.l.wgpio, tc.l.kernelDetail = "none", "none"
		tc.l.write(&b)
		got := b.String()
		if tc.want == "" && strings.Contains(got, "not counted") || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: ledger:\n%s\nwant %q", tc.name, got, tc.want)
		}
	}
}
