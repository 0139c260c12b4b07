package fastgw_test

import (
	"encoding/binary"
	"net"
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
// per flow). With the default ReplayWindow (auto), B's window for the
// session widens (counted in ReplayWidened) and no datagram is lost to the
// replay check; any loss at all must be AF_XDP ring overflows the kernel
// counted (a worker not scheduled in time on a loaded machine).
func TestReplayWindowWidensOnTwoQueues(t *testing.T) {
	const n, flows, rate = 40_000, 16, 10_000 // datagrams, inner flows, per second
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
	senders := make([]*net.UDPConn, flows)
	for i := range senders {
		if err := s.HostA.Do(func() (err error) {
			senders[i], err = net.DialUDP("udp4", &net.UDPAddr{Port: 40000 + i}, &net.UDPAddr{IP: twosite.HostB4.AsSlice(), Port: 9200})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer senders[i].Close()
	}
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
		if _, err := senders[i%flows].Write(msg); err != nil {
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
	for q, d := range perQueue {
		if d < n/64 { // at least one flow of the 16 (all on one queue: a chance of 2^-15)
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
	if out, err := s.HostB.Run("nstat", "-az", "UdpRcvbufErrors"); err == nil {
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
