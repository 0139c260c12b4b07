//go:build linux

package fastgw_test

import (
	"bytes"
	"io"
	"net"
	"testing"

	"github.com/wgpio/wgpio/internal/topo"
)

// TestFullTunnelCoalesced: a road warrior's TCP streams through its full
// tunnel, 8 MiB up to the Internet host and 8 MiB down from it, arrive
// whole, and up, the workers' bursts cross the exception TUN coalesced
// into large packets (GRO on write): the interface's kernel RX packets,
// one a write, fewer than the TUN's TXPackets, which a packet a write
// made equal. (Down, the kernel would hand the TUN large packets to
// split on read if the WAN gave it such; here the WAN is a veth with
// the fast path's XDP program, through which the kernel receives
// packets of the MTU: the counts are logged.)
func TestFullTunnelCoalesced(t *testing.T) {
	r := newFullTunnelRig(t)
	pingOut(t, r.p1, "198.18.200.1")
	const size = 8 << 20
	kernel := func() (rx, tx uint64) {
		t.Helper()
		l, err := r.gw.Handle().LinkByName(r.name)
		if err != nil || l.Attrs().Statistics == nil {
			t.Fatalf("exception TUN %s: %v", r.name, err)
		}
		return l.Attrs().Statistics.RxPackets, l.Attrs().Statistics.TxPackets
	}
	for _, up := range []bool{true, false} {
		rx0, tx0 := kernel()
		s0, _ := r.g.ExceptionTUN()
		got := streamThrough(t, r.p1, r.inet, "198.18.200.1:5201", size, up)
		if got != size {
			t.Fatalf("up %v: %d bytes arrived, want %d", up, got, size)
		}
		rx1, tx1 := kernel()
		s1, _ := r.g.ExceptionTUN()
		written, writes := s1.TXPackets-s0.TXPackets, rx1-rx0
		read, reads := s1.RXPackets-s0.RXPackets, tx1-tx0
		t.Logf("up %v: %d packets written to the host in %d kernel packets; %d read from it in %d kernel packets", up, written, writes, read, reads)
		if up && writes >= written {
			t.Errorf("up: %d packets written to the host in %d kernel packets, want fewer (coalesced)", written, writes)
		}
	}
	t.Logf("gateway drops: %s", dropsString(r.g))
}

// streamThrough sends size bytes over TCP between a client in from and a
// server at addr in to (up: the client sends; down: the server does),
// and returns the bytes the receiver got.
func streamThrough(t *testing.T, from, to *topo.NS, addr string, size int, up bool) int64 {
	t.Helper()
	var l net.Listener
	if err := to.Do(func() (err error) { l, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	payload := bytes.Repeat([]byte("full tunnel "), size/12+1)[:size]
	done := make(chan int64, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- -1
			return
		}
		defer c.Close()
		if up {
			n, _ := io.Copy(io.Discard, c)
			done <- n
			return
		}
		c.Write(payload)
		done <- 0
	}()
	var c net.Conn
	if err := from.Do(func() (err error) { c, err = net.Dial("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	if !up {
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		<-done
		return n
	}
	if _, err := c.Write(payload); err != nil {
		t.Fatalf("send: %v", err)
	}
	c.Close()
	return <-done
}
