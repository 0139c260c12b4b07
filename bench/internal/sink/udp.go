//go:build linux

package sink

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/wgpio/wgpio/bench/internal/gen"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

const (
	batch = 64
	// rcvbuf is the receive buffer asked for, in bytes (SO_RCVBUFFORCE).
	rcvbuf = 64 << 20
)

// Counts is what the sink saw of one run.
type Counts struct {
	Run uint32
	// Received counts packets of this run (each sequence number once).
	Received uint64
	// Reordered counts packets whose sequence number was lower than one
	// already seen on their flow.
	Reordered uint64
	// Duplicates counts packets whose sequence number was seen before.
	Duplicates uint64
	// Stale counts bench packets of another run (late from a previous
	// step); Foreign counts datagrams that were not bench packets.
	Stale, Foreign uint64
	// PerFlow is Received by flow.
	PerFlow []uint64
}

// UDP counts bench packets arriving on one UDP socket. Its methods are safe
// for concurrent use with its reader goroutine.
type UDP struct {
	conn *net.UDPConn
	pc   *ipv4.PacketConn

	mu     sync.Mutex // guards the fields below; taken once per batch
	counts Counts
	seen   []map[uint64]struct{} // per flow: sequence numbers already seen below next
	next   []uint64              // per flow: highest sequence number seen + 1
	done   chan struct{}
	err    error
}

// ListenUDP opens a UDP socket on addr and starts its reader. Call it in the
// sink's network namespace (e.g. inside topo.NS.Do): the socket stays there.
func ListenUDP(addr netip.AddrPort) (*UDP, error) {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, fmt.Errorf("sink: listen %v: %w", addr, err)
	}
	if rc, err := c.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf) != nil {
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
			}
		})
	}
	s := &UDP{conn: c, pc: ipv4.NewPacketConn(c), done: make(chan struct{})}
	go s.read()
	return s, nil
}

// Start resets the counters for run with flows flows. Packets of other runs
// count as Stale from now on.
func (s *UDP) Start(run uint32, flows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts = Counts{Run: run, PerFlow: make([]uint64, flows)}
	s.next = make([]uint64, flows)
	s.seen = make([]map[uint64]struct{}, flows)
}

// Counts returns a copy of the current run's counters.
func (s *UDP) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counts
	c.PerFlow = append([]uint64(nil), c.PerFlow...)
	return c
}

// Close stops the reader and closes the socket.
func (s *UDP) Close() error {
	err := s.conn.Close()
	<-s.done
	return err
}

func (s *UDP) read() {
	defer close(s.done)
	msgs := make([]ipv4.Message, batch)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{make([]byte, 2048)}
	}
	for {
		n, err := s.pc.ReadBatch(msgs, 0)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
			}
			return
		}
		s.mu.Lock()
		for i := range n {
			s.count(msgs[i].Buffers[0][:msgs[i].N])
		}
		s.mu.Unlock()
	}
}

// count books one datagram; s.mu is held.
func (s *UDP) count(p []byte) {
	h, ok := gen.ParsePayload(p)
	c := &s.counts
	switch {
	case !ok:
		c.Foreign++
		return
	case h.Run != c.Run || int(h.Flow) >= len(s.next):
		c.Stale++
		return
	}
	f := h.Flow
	if h.Seq >= s.next[f] {
		// Remember skipped numbers only while the gap is small, so that a
		// late packet can be told from a duplicate without unbounded memory.
		if gap := h.Seq - s.next[f]; gap > 0 && gap < 4096 {
			if s.seen[f] == nil {
				s.seen[f] = make(map[uint64]struct{})
			}
			for q := s.next[f]; q < h.Seq; q++ {
				s.seen[f][q] = struct{}{}
			}
		}
		s.next[f] = h.Seq + 1
	} else {
		if _, missing := s.seen[f][h.Seq]; !missing {
			c.Duplicates++
			return
		}
		delete(s.seen[f], h.Seq)
		c.Reordered++
	}
	c.Received++
	c.PerFlow[f]++
}

// SNMP holds the UDP counters of /proc/net/snmp that tell whether a socket
// reader kept up.
type SNMP struct {
	InDatagrams, NoPorts, InErrors, RcvbufErrors uint64
}

// ParseSNMP reads the "Udp:" lines of /proc/net/snmp.
func ParseSNMP(text string) (SNMP, error) {
	var names, values []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f[1:]
		} else {
			values = f[1:]
		}
	}
	if names == nil || len(values) != len(names) {
		return SNMP{}, errors.New("sink: no Udp lines in snmp text")
	}
	var s SNMP
	for i, n := range names {
		v, err := strconv.ParseUint(values[i], 10, 64)
		if err != nil {
			return SNMP{}, fmt.Errorf("sink: snmp Udp %s: %w", n, err)
		}
		switch n {
		case "InDatagrams":
			s.InDatagrams = v
		case "NoPorts":
			s.NoPorts = v
		case "InErrors":
			s.InErrors = v
		case "RcvbufErrors":
			s.RcvbufErrors = v
		}
	}
	return s, nil
}
