package bind

import (
	"net/netip"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/dataplane"
)

// TestOpenCloseChurn: wireguard-go closes and opens the Bind again on
// every listen_port set (a SIGHUP storm reloading a file with ListenPort:
// wg syncconf each time), while datagrams arrive and wireguard-go sends.
// After 200 such rebinds, with receivers inside their ReceiveFunc and
// senders in Send as Close comes (run with -race), the Bind still
// receives, and holds no more file descriptors than after its first Open.
func TestOpenCloseChurn(t *testing.T) {
	r := newRig(t, 2, nil)
	fds := countFDs(t)
	from := netip.AddrPortFrom(peerIP4, 1)
	ep, err := r.bind.ParseEndpoint(from.String())
	if err != nil {
		t.Fatal(err)
	}
	fns := r.fns
	for round := range 200 {
		var wg sync.WaitGroup
		readAll(&wg, fns, func(int) {})
		stop := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r.bind.Send([][]byte{[]byte("out")}, ep)
			}
		}()
		for i := range 4 {
			r.inject(t, i%2, udpFrame(from, netip.AddrPortFrom(ourIP4, ourPort), []byte("in"), false))
		}
		if round%3 == 0 {
			time.Sleep(time.Millisecond)
		}
		if err := r.bind.Close(); err != nil {
			t.Fatal(err)
		}
		close(stop)
		wg.Wait()
		r.drainPeer()
		if fns, _, err = r.bind.Open(ourPort); err != nil {
			t.Fatalf("round %d: Open = %v", round, err)
		}
	}
	r.fns = fns
	before := r.bind.Stats().RXPackets
	got := make(chan struct{}, 1)
	var wg sync.WaitGroup
	readAll(&wg, fns, func(int) {
		select {
		case got <- struct{}{}:
		default:
		}
	})
	r.inject(t, 0, udpFrame(from, netip.AddrPortFrom(ourIP4, ourPort), []byte("after"), false))
	r.inject(t, 1, udpFrame(from, netip.AddrPortFrom(ourIP4, ourPort), []byte("after"), false))
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Errorf("nothing received after 200 rebinds (RXPackets %d before)", before)
	}
	r.bind.Close()
	wg.Wait()
	if n := countFDs(t); n > fds {
		t.Errorf("open file descriptors: %d after 200 rebinds, %d after the first Open", n, fds)
	}
}

// countFDs returns how many file descriptors the process has open: the
// entries of /proc/self/fd on Linux; elsewhere the descriptors below the
// soft RLIMIT_NOFILE (at most 65,536) that fcntl(2) F_GETFD finds open.
func countFDs(t *testing.T) int {
	t.Helper()
	if runtime.GOOS == "linux" {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	n := 0
	for fd := range min(lim.Cur, 1<<16) {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
			n++
		}
	}
	return n
}

// drainPeer frees every frame waiting on the peer's side, so that the
// senders of many rounds do not fill its rings.
func (r *rig) drainPeer() {
	fs := make([]dataplane.Frame, 256)
	for q := range r.b.NumQueues() {
		rx := r.b.Queue(q).RX()
		for n := rx.Receive(fs); n > 0; n = rx.Receive(fs) {
			rx.Free(fs[:n])
		}
	}
}
