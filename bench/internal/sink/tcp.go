//go:build linux

package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// TCPServer accepts one TCP connection at a time and discards what it
// reads, counting bytes.
type TCPServer struct {
	l     net.Listener
	bytes atomic.Uint64
	done  chan struct{}
}

// ListenTCP listens on addr ("198.18.3.2:5201"). Call it in the receiver's
// network namespace.
func ListenTCP(addr string) (*TCPServer, error) {
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		return nil, fmt.Errorf("sink: listen tcp %s: %w", addr, err)
	}
	s := &TCPServer{l: l, done: make(chan struct{})}
	go s.serve()
	return s, nil
}

func (s *TCPServer) serve() {
	defer close(s.done)
	buf := make([]byte, 256<<10)
	for {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		for {
			n, err := c.Read(buf)
			s.bytes.Add(uint64(n))
			if err != nil {
				break
			}
		}
		c.Close()
	}
}

// Bytes is the number of bytes received so far.
func (s *TCPServer) Bytes() uint64 { return s.bytes.Load() }

// Close stops accepting.
func (s *TCPServer) Close() error {
	err := s.l.Close()
	<-s.done
	return err
}

// TCPResult is what one stream did, seen from the sender.
type TCPResult struct {
	Seconds float64 `json:"seconds"`
	Bytes   uint64  `json:"bytes"` // bytes the receiver counted
	Mbps    float64 `json:"mbps"`  // receiver bytes × 8 / seconds / 1e6
	// Retransmits is tcpi_total_retrans of the sender.
	Retransmits uint32 `json:"retransmits"`
	// ReorderEvents is tcpi_reord_seen of the sender (Linux 4.19+).
	ReorderEvents uint32 `json:"reorder_events"`
	// ReorderingMetric is tcpi_reordering, the sender's reordering degree.
	ReorderingMetric uint32 `json:"reordering"`
}

// SendTCP writes to c for d, reads the sender's TCP_INFO and closes c. rx is
// the receiving server (for the byte count). c must be connected.
func SendTCP(ctx context.Context, c *net.TCPConn, rx *TCPServer, d time.Duration) (TCPResult, error) {
	defer c.Close()
	buf := make([]byte, 128<<10)
	before := rx.Bytes()
	start := time.Now()
	c.SetWriteDeadline(start.Add(d))
	stop := context.AfterFunc(ctx, func() { c.SetWriteDeadline(time.Now()) })
	defer stop()
	for {
		if _, err := c.Write(buf); err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || isTimeout(err) {
				break
			}
			return TCPResult{}, fmt.Errorf("sink: tcp write: %w", err)
		}
	}
	elapsed := time.Since(start)
	var info *unix.TCPInfo
	rc, err := c.SyscallConn()
	if err != nil {
		return TCPResult{}, fmt.Errorf("sink: tcp raw conn: %w", err)
	}
	var ierr error
	rc.Control(func(fd uintptr) { info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
	if ierr != nil {
		return TCPResult{}, fmt.Errorf("sink: TCP_INFO: %w", ierr)
	}
	// Let in-flight bytes land before counting.
	time.Sleep(200 * time.Millisecond)
	got := rx.Bytes() - before
	return TCPResult{
		Seconds:          elapsed.Seconds(),
		Bytes:            got,
		Mbps:             float64(got) * 8 / elapsed.Seconds() / 1e6,
		Retransmits:      info.Total_retrans,
		ReorderEvents:    info.Reord_seen,
		ReorderingMetric: info.Reordering,
	}, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
