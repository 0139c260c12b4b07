//go:build linux

package nldump

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestRetry: an interrupted dump is run again until it is not, at most
// Tries times; another error ends it at once.
func TestRetry(t *testing.T) {
	calls := 0
	v, err := Retry(func() (int, error) {
		calls++
		if calls < 3 {
			return -1, fmt.Errorf("list: %w", netlink.ErrDumpInterrupted)
		}
		return 42, nil
	})
	if v != 42 || err != nil || calls != 3 {
		t.Errorf("Retry = %d, %v after %d dumps; want 42, nil after 3", v, err, calls)
	}
	calls = 0
	_, err = Retry(func() (int, error) { calls++; return 0, netlink.ErrDumpInterrupted })
	if !errors.Is(err, netlink.ErrDumpInterrupted) || calls != Tries {
		t.Errorf("always interrupted: %v after %d dumps; want ErrDumpInterrupted after %d", err, calls, Tries)
	}
	calls = 0
	other := errors.New("no such device")
	if _, err = Retry(func() (int, error) { calls++; return 0, other }); err != other || calls != 1 {
		t.Errorf("another error: %v after %d dumps; want it after 1", err, calls)
	}
}

// TestRetryAddressChurn: an interface's 2,000 addresses listed while one
// of them is removed and added again without pause: the kernel
// interrupts some of the plain dumps (NLM_F_DUMP_INTR), none of the
// dumps through Retry fail. (With no pause between the changes half the
// plain dumps were interrupted, and 4 of 200 through a Retry of 8 tries
// each, still were: a table changing faster than it can be read is read
// as the last try left it.)
func TestRetryAddressChurn(t *testing.T) {
	tp := testenv.Topology(t, "nldp")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	v, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Handle()
	l, err := h.LinkByName(v.A)
	if err != nil {
		t.Fatal(err)
	}
	addr := func(i int) *netlink.Addr {
		ad, err := netlink.ParseAddr(fmt.Sprintf("198.19.%d.%d/32", i/250, 1+i%250))
		if err != nil {
			t.Fatal(err)
		}
		return ad
	}
	const n = 2000
	for i := range n {
		if err := h.AddrAdd(l, addr(i)); err != nil {
			t.Fatal(err)
		}
	}
	churn, err := netlink.NewHandleAt(a.NsHandle())
	if err != nil {
		t.Fatal(err)
	}
	defer churn.Close()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		x := addr(n)
		for {
			select {
			case <-stop:
				return
			default:
			}
			churn.AddrAdd(l, x)
			churn.AddrDel(l, x)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	defer func() { close(stop); <-done }()
	plain, failed := 0, 0
	for range 200 {
		if _, err := h.AddrList(l, netlink.FAMILY_V4); errors.Is(err, netlink.ErrDumpInterrupted) {
			plain++
		}
		addrs, err := Retry(func() ([]netlink.Addr, error) { return h.AddrList(l, netlink.FAMILY_V4) })
		if err != nil {
			failed++
			t.Logf("Retry: %v", err)
		} else if len(addrs) < n {
			t.Errorf("Retry listed %d addresses, want %d or more", len(addrs), n)
		}
	}
	t.Logf("%d of 200 plain dumps interrupted", plain)
	if failed > 0 {
		t.Errorf("%d of 200 dumps through Retry failed", failed)
	}
}

// TestAgain: a failure arms C after AgainDelay, further ones double the
// delay up to AgainMaxDelay (a try due already is kept), and a success
// disarms it and starts over.
func TestAgain(t *testing.T) {
	var a Again
	if a.C != nil {
		t.Fatal("the zero Again has a try due")
	}
	a.After(true)
	c := a.C
	if c == nil || a.delay != AgainDelay {
		t.Fatalf("after a failure: due %v, delay %v; want a try after %v", c != nil, a.delay, AgainDelay)
	}
	a.After(true) // a try is due: kept
	if a.C != c || a.delay != AgainDelay {
		t.Errorf("a second failure before the try: a new timer or delay %v", a.delay)
	}
	<-a.C
	a.Fired()
	for want := 2 * AgainDelay; want <= 2*AgainMaxDelay; want *= 2 {
		a.After(true)
		if w := min(want, AgainMaxDelay); a.delay != w {
			t.Fatalf("delay %v, want %v", a.delay, w)
		}
		a.Fired()
	}
	a.After(false)
	if a.C != nil || a.delay != 0 {
		t.Errorf("after a success: due %v, delay %v; want none", a.C != nil, a.delay)
	}
	a.After(true)
	if a.delay != AgainDelay {
		t.Errorf("a failure after a success waits %v, want %v", a.delay, AgainDelay)
	}
}
