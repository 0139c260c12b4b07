//go:build linux

package fastgw_test

import (
	"encoding/binary"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestReplayWindowWidensOnTwoQueues is the seed report's case in the
// namespace rig: two wgpio gateways with 2 queues and 16 outer source ports
// through a router, one session carrying 16 inner flows, so that gateway B
// receives it on both of its WAN queues (the router's veth picks a TX queue
// per outer flow; see spreadFlows). With the default ReplayWindow (auto), B's window for the
// session widens (counted in ReplayWidened) and no datagram is lost to the
// replay check; any loss at all must be AF_XDP ring overflows the kernel
// counted (a worker not scheduled in time on a loaded machine).
func TestReplayWindowWidensOnTwoQueues(t *testing.T) {
	const n, flows, rate = 40_000, 16, 10_000 // datagrams, inner flows (at least), per second
	s := newSite(t, twosite.Config{PeerFastPath: true, Routed: true, Queues: 2, SourcePorts: 16, CPUs: []int{0, 1}})
	ping(t, s.HostA, twosite.HostB4.String(), 0)

	var rc *net.UDPConn
	if err := s.HostB.Do(func() (err error) {
		rc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: twosite.HostB4.AsSlice(), Port: 9200})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if raw, err := rc.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20)
		})
	}
	senders := spreadFlows(t, s, flows, n)
	got := make(chan int, 1)
	go func() {
		seen := make([]bool, n)
		buf := make([]byte, 2048)
		cnt := 0
		for cnt < n {
			rc.SetReadDeadline(time.Now().Add(5 * time.Second))
			k, err := rc.Read(buf)
			if err != nil {
				break
			}
			if k < 4 {
				continue
			}
			if seq := int(binary.BigEndian.Uint32(buf)); seq < n && !seen[seq] {
				seen[seq] = true
				cnt++
			}
		}
		got <- cnt
	}()
	before := s.PeerGateway.Engine().Stats()
	linkDropsBefore, _ := pathLinkDrops(t, s)
	start := time.Now()
	msg := make([]byte, 64)
	for i := range n {
		if due := time.Duration(float64(i) / rate * float64(time.Second)); time.Since(start) < due {
			time.Sleep(due - time.Since(start))
		}
		binary.BigEndian.PutUint32(msg, uint32(i))
		if _, err := senders[i%len(senders)].Write(msg); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	received := <-got
	after := s.PeerGateway.Engine().Stats()
	var widened, replays uint64
	var perQueue []uint64
	for q := range after {
		widened += after[q].ReplayWidened
		replays += after[q].Drops[fastpath.DropReplay]
		perQueue = append(perQueue, after[q].Decrypted-before[q].Decrypted)
	}
	t.Logf("received %d of %d; B decrypted per queue %v, replay windows widened %d, replay drops %d; drops A %s B %s",
		received, n, perQueue, widened, replays, dropsString(s.Gateway), dropsString(s.PeerGateway))
	// spreadFlows saw each queue take at least one flow, of n/len(senders)
	// datagrams; a quarter of one is the mark of the session spread
	// (the losses the test allows below, AF_XDP ring overflows on a
	// loaded machine, may fall on a queue's only flow).
	for q, d := range perQueue {
		if d < uint64(n/len(senders)/4) {
			t.Fatalf("B's queue %d decrypted %d of %d: the session did not spread over both queues (per queue %v)", q, d, n, perQueue)
		}
	}
	if widened == 0 {
		t.Errorf("B's replay window did not widen for a session received on 2 queues")
	}
	if replays != 0 {
		t.Errorf("B dropped %d packets as replays", replays)
	}
	// On a loaded machine a worker may not be scheduled in time and its
	// AF_XDP RX ring overflows: the kernel counts those frames. Every
	// datagram missing must be one of them, or one host B's socket had no
	// room for (nothing lost to the replay window, nothing lost silently).
	wanA, lanA := s.Gateway.Ports()
	wanB, lanB := s.PeerGateway.Ports()
	var ringDrops uint64
	for _, st := range []map[string]uint64{lanA.Stats().Backend, wanB.Stats().Backend} {
		ringDrops += st["xsk_rx_ring_full"] + st["xsk_rx_dropped"]
	}
	// A veth whose peer has no room (the router's backlog, the NAPI ring in
	// front of B's XDP program) drops the frame and counts it at the link.
	linkDropsAfter, linkDetail := pathLinkDrops(t, s)
	ringDrops += linkDropsAfter - linkDropsBefore
	// And host B's socket may overflow while its reader waits for a CPU.
	if out, err := s.HostB.Run("nstat", "-asz", "UdpRcvbufErrors"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "UdpRcvbufErrors" {
				v, _ := strconv.ParseUint(f[1], 10, 64)
				ringDrops += v
			}
		}
	}
	if lost := uint64(n - received); lost > ringDrops {
		t.Errorf("received %d of %d datagrams: %d lost, %d counted by the AF_XDP rings, the path's links and host B's socket (links:%s)\nA LAN %+v\nA WAN %+v\nB WAN %+v\nB LAN %+v",
			received, n, lost, ringDrops, linkDetail, lanA.Stats(), wanA.Stats(), wanB.Stats(), lanB.Stats())
	} else if lost > 0 {
		t.Logf("%d datagrams lost to AF_XDP RX ring, link or socket overflows (machine load), counted by the kernel (links:%s)", lost, linkDetail)
	}
}

// pathLinkDrops sums the kernel's drop counters of the links between the
// two gateways (gateway A's, the router's and gateway B's namespaces).
func pathLinkDrops(t *testing.T, s *twosite.Site) (uint64, string) {
	t.Helper()
	total, detail, err := topo.LinkDrops(s.GwA, s.Router, s.GwB)
	if err != nil {
		t.Fatal(err)
	}
	return total, detail
}

// spreadFlows returns UDP sockets of host A to host B's port 9200, one per
// inner flow, at least flows of them and as many more, 16 at a time (up
// to 256), as it takes for gateway B to receive the session on each of
// its WAN queues: it sends each new flow a probe (a sequence number from
// seqBase up, which the test's receiver ignores) and reads B's decrypted
// count per queue. The kernel steers each outer flow (gateway A's outer
// source port) to a queue of B by the router's transmit hash, not evenly:
// on the 2 December machine 16 inner flows (on 9 of A's 16 source ports)
// left 1 or 2 flows on B's second queue in most runs and none in 1 run
// of 10, where the test needs both queues to carry the session.
func spreadFlows(t *testing.T, s *twosite.Site, flows, seqBase int) []*net.UDPConn {
	t.Helper()
	var senders []*net.UDPConn
	t.Cleanup(func() {
		for _, c := range senders {
			c.Close()
		}
	})
	start := s.PeerGateway.Engine().Stats()
	msg := make([]byte, 64)
	for len(senders) < 256 {
		for range 16 {
			i := len(senders)
			var c *net.UDPConn
			if err := s.HostA.Do(func() (err error) {
				c, err = net.DialUDP("udp4", &net.UDPAddr{Port: 40000 + i}, &net.UDPAddr{IP: twosite.HostB4.AsSlice(), Port: 9200})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			senders = append(senders, c)
			binary.BigEndian.PutUint32(msg, uint32(seqBase+i))
			if _, err := c.Write(msg); err != nil {
				t.Fatalf("probe %d: %v", i, err)
			}
		}
		// Wait for the probes (B decrypts each), then look at the queues.
		var per []uint64
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			per = per[:0]
			var total uint64
			for q, st := range s.PeerGateway.Engine().Stats() {
				per = append(per, st.Decrypted-start[q].Decrypted)
				total += per[q]
			}
			if total >= uint64(len(senders)) || time.Now().After(deadline) {
				break
			}
		}
		if len(senders) >= flows && !slices.Contains(per, 0) {
			t.Logf("%d inner flows reach every queue of B (probes per queue %v)", len(senders), per)
			return senders
		}
	}
	t.Fatalf("%d inner flows from host A all reached B on the same queue", len(senders))
	return nil
}
