package acceptloop

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/sockettest"
)

// pingServe answers each "ping\n" of c with "pong\n" until c fails: a
// client that sends nothing holds it.
func pingServe(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		if _, err := r.ReadString('\n'); err != nil {
			return
		}
		if _, err := io.WriteString(c, "pong\n"); err != nil {
			return
		}
	}
}

// ping sends "ping\n" on c and reports whether "pong\n" came back
// within d.
func ping(c net.Conn, d time.Duration) error {
	c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return err
	}
	l, err := bufio.NewReader(c).ReadString('\n')
	if err == nil && l != "pong\n" {
		err = errors.New("reply " + l)
	}
	return err
}

// TestServerBounded: clients that open many more connections than Conns
// and send nothing cost at most 2*Conns connections' goroutines: the
// ones over Conns wait up to Wait, and over Conns waiting are refused at
// once, each counted. A connection waiting is served as soon as a slot
// frees, before one opened after it. Closing the listener ends Serve,
// after it closed every connection and its goroutines returned.
func TestServerBounded(t *testing.T) {
	const conns, extra, wait = 4, 40, time.Second
	ln, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	base := runtime.NumGoroutine()
	var logged bytes.Buffer // written by Serve's goroutines, read once it returned
	s := &Server{Conns: conns, Wait: wait, What: "test socket", Log: slog.New(slog.NewTextHandler(&logged, nil))}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln, pingServe) }()
	dial := func() net.Conn { return sockettest.Dial(t, ln.Addr().String()) }

	// Conns served and silent, each answered once to be sure it holds
	// its slot.
	var held []net.Conn
	for range conns {
		c := dial()
		if err := ping(c, 5*time.Second); err != nil {
			t.Fatalf("a connection within the limit: %v", err)
		}
		held = append(held, c)
	}
	// Conns waiting, then extra over them, refused at once.
	var waiting, over []net.Conn
	for range conns {
		waiting = append(waiting, dial())
	}
	for range extra {
		over = append(over, dial())
	}
	for i, c := range over {
		if !sockettest.ClosedWithin(c, wait/2) {
			t.Fatalf("connection %d over the limit and the waiting ones: not closed within %v", i, wait/2)
		}
	}
	// The server's goroutines: one per connection served or waiting,
	// and Serve's (the test's own are beside: pipes need none).
	if g := runtime.NumGoroutine() - base; g > 2*conns+2 {
		t.Errorf("%d goroutines with %d connections open (limit %d), want at most %d", g, conns+conns+extra, conns, 2*conns+2)
	}
	if got := s.Refused(); got != extra {
		t.Errorf("Refused() = %d after %d connections over the waiting ones, want %d", got, extra, extra)
	}

	// A slot frees: the first waiting connection is served in it, the
	// others are refused after Wait.
	held[0].Close()
	if err := ping(waiting[0], 5*time.Second); err != nil {
		t.Fatalf("the first waiting connection, once a slot freed: %v", err)
	}
	for i, c := range waiting[1:] {
		if !sockettest.ClosedWithin(c, 10*wait) {
			t.Errorf("waiting connection %d: not closed within %v (Wait %v)", i+1, 10*wait, wait)
		}
	}
	if got := s.Refused(); got != extra+conns-1 {
		t.Errorf("Refused() = %d, want %d", got, extra+conns-1)
	}

	// A waiting connection is closed with the listener, without a
	// refusal.
	late := dial()
	time.Sleep(wait / 4) // accepted, waiting
	ln.Close()
	select {
	case err := <-served:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Serve after the listener's Close = %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return within 5 s of the listener's Close")
	}
	for i, c := range append(held[1:], waiting[0], late) {
		if !sockettest.ClosedWithin(c, time.Second) {
			t.Errorf("connection %d still open after Serve returned", i)
		}
	}
	if got := s.Refused(); got != extra+conns-1 {
		t.Errorf("Refused() = %d after the listener's Close, want %d (no more)", got, extra+conns-1)
	}
	checkGoroutines(t, base)
	// The refusals within RefuseLogInterval: one line.
	if n := strings.Count(logged.String(), "connection refused"); n != 1 {
		t.Errorf("%d refusals logged in one line each %v, want 1:\n%s", n, RefuseLogInterval, logged.String())
	}
}

// TestServerRefuse: with Refuse, a refused connection is answered (here
// "busy\n") and then closed; at most Conns answers run at once, and a
// refused connection over them is closed unanswered, counted all the
// same. Serve returns only once the answers under way ended.
func TestServerRefuse(t *testing.T) {
	const conns = 2
	defer func(d time.Duration) { refuseTime = d }(refuseTime)
	refuseTime = time.Minute // the answers wait for hold, not for a deadline
	ln, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	base := runtime.NumGoroutine()
	// The answers wait for the gate's channel to be closed.
	var gate atomic.Pointer[chan struct{}]
	hold := make(chan struct{})
	gate.Store(&hold)
	s := &Server{Conns: conns, Wait: time.Hour, Refuse: func(c net.Conn) {
		<-*gate.Load()
		io.WriteString(c, "busy\n")
	}}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln, pingServe) }()
	dial := func() net.Conn { return sockettest.Dial(t, ln.Addr().String()) }
	for range 2 * conns { // conns served, conns waiting
		dial()
	}
	// conns refused, their answers held (the accept loop takes the
	// connections in order), then more: closed at once, unanswered.
	var answered []net.Conn
	for range conns {
		answered = append(answered, dial())
	}
	for i := range 3 {
		if got, ok := sockettest.RefusedWithin(dial(), time.Second, nil); !ok {
			t.Errorf("refused connection %d over %d answers under way: got %q, want nothing and closed", i, conns, got)
		}
	}
	close(hold)
	for i, c := range answered {
		if got, ok := sockettest.RefusedWithin(c, time.Second, []byte("busy\n")); !ok {
			t.Errorf("refused connection %d: got %q, want \"busy\\n\" and closed", i, got)
		}
	}
	if got, want := s.Refused(), uint64(conns+3); got != want {
		t.Errorf("Refused() = %d, want %d", got, want)
	}
	// Serve returns after the answers under way.
	hold2 := make(chan struct{})
	gate.Store(&hold2)
	for range conns {
		dial()
	}
	for deadline := time.Now().Add(5 * time.Second); s.Refused() < 2*conns+3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Refused() = %d 5 s after %d more connections, want %d", s.Refused(), conns, 2*conns+3)
		}
	}
	ln.Close()
	select {
	case <-served:
		t.Fatal("Serve returned with answers under way")
	case <-time.After(100 * time.Millisecond):
	}
	close(hold2)
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return within 5 s of the listener's Close")
	}
	checkGoroutines(t, base)
}

// checkGoroutines fails t if more goroutines than base are left 5 s after
// Serve returned. Serve waits for its goroutines' wg.Done, which each calls
// before it has exited, and the test's own goroutine that sent Serve's
// result may not have exited either: a count taken at once can be one over
// with nothing left behind, so the count is read until it settles.
func checkGoroutines(t *testing.T, base int) {
	t.Helper()
	if !testenv.PollUntil(5*time.Second, func() bool { return runtime.NumGoroutine() <= base }) {
		t.Errorf("%d goroutines more than before Serve 5 s after it returned", runtime.NumGoroutine()-base)
	}
}
