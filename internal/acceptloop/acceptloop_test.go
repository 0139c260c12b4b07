package acceptloop

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
)

// script is a listener whose Accept returns its errors in turn (a nil
// error: a connection), then net.ErrClosed.
type script struct {
	mu    sync.Mutex
	errs  []error
	calls int
}

func (s *script) Accept() (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if len(s.errs) == 0 {
		return nil, net.ErrClosed
	}
	err := s.errs[0]
	s.errs = s.errs[1:]
	if err != nil {
		return nil, err
	}
	c, _ := net.Pipe()
	return c, nil
}
func (s *script) Close() error   { return nil }
func (s *script) Addr() net.Addr { return &net.UnixAddr{Name: "script", Net: "unix"} }

func opErr(e syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", e)}
}

// TestAcceptOutlivesExhaustion: Accept goes on past EMFILE, ENFILE and
// ENOBUFS to the next connection, reports each run of failures once,
// and returns net.ErrClosed once the listener is closed.
func TestAcceptOutlivesExhaustion(t *testing.T) {
	s := &script{errs: []error{opErr(syscall.EMFILE), opErr(syscall.EMFILE), opErr(syscall.ENFILE), nil,
		opErr(syscall.ENOBUFS), nil}}
	var reported []error
	onErr := func(err error) { reported = append(reported, err) }
	for i := range 2 {
		c, err := Accept(s, onErr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		c.Close()
	}
	if len(reported) != 2 || !errors.Is(reported[0], syscall.EMFILE) || !errors.Is(reported[1], syscall.ENOBUFS) {
		t.Errorf("reported %v, want the first EMFILE and the ENOBUFS", reported)
	}
	if _, err := Accept(s, onErr); !errors.Is(err, net.ErrClosed) {
		t.Errorf("closed listener: %v, want net.ErrClosed", err)
	}
	if s.calls != 7 {
		t.Errorf("%d Accepts, want 7", s.calls)
	}
}

// TestAcceptClosedReal: a real listener closed while Accept waits ends
// it with net.ErrClosed.
func TestAcceptClosedReal(t *testing.T) {
	ln, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Accept(ln, nil)
		done <- err
	}()
	ln.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
}

// TestAcceptClosedFile: a listener that reports its closing as a closed
// file (wireguard-go's UAPI listener: its inotify file's read, "file
// already closed") is closed too: Accept returns, nothing reported. Before,
// compat mode's UAPI loop logged "accept failed; trying again" at every
// shutdown and went on trying.
func TestAcceptClosedFile(t *testing.T) {
	closed := &os.PathError{Op: "read", Path: "inotify", Err: os.ErrClosed}
	s := &script{errs: []error{closed, nil}}
	reported := 0
	if _, err := Accept(s, func(error) { reported++ }); !errors.Is(err, os.ErrClosed) || reported != 0 || s.calls != 1 {
		t.Errorf("Accept = %v after %d calls, %d reported; want os.ErrClosed at once, none reported", err, s.calls, reported)
	}
}

// TestRetrying: a Retrying listener's Accept goes past the failures
// (reported once per run) to the next connection, and returns
// net.ErrClosed once the listener is closed.
func TestRetrying(t *testing.T) {
	s := &script{errs: []error{opErr(syscall.ENOBUFS), opErr(syscall.ENOMEM), nil, opErr(syscall.EPROTO), nil}}
	var reported []error
	ln := Retrying(s, func(err error) { reported = append(reported, err) })
	for i := range 2 {
		c, err := ln.Accept()
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		c.Close()
	}
	if len(reported) != 2 || !errors.Is(reported[0], syscall.ENOBUFS) || !errors.Is(reported[1], syscall.EPROTO) {
		t.Errorf("reported %v, want the ENOBUFS and the EPROTO", reported)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("closed listener: %v, want net.ErrClosed", err)
	}
	if ln.Addr() != s.Addr() && ln.Addr().String() != s.Addr().String() {
		t.Errorf("Addr = %v, want the listener's", ln.Addr())
	}
}
