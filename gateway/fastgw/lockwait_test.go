//go:build linux

package fastgw

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/noise"
)

// TestLargeSetLockWait times one UAPI set of FASTGW_LOCK_WAIT_PEERS peers
// (a /32 and a /128 each, over a UAPI connection) on a device over a dataplane with an exception
// TUN (a veth in a namespace, as newRouteRig), and how long the device's
// lock kept waiting a call that takes it (WANAddrs, as the handshakes and
// timers take it; probed every 10 ms) and `wg show` (IpcGet, once a
// second) while the set ran: README, "Large configurations". Then the
// same for a set that removes nine peers of ten (as `wg syncconf` of a
// configuration that dropped them sends it), and the time Close takes
// to remove the rest. Skipped unless the variable is set: it measures;
// it checks only the routes into the exception TUN and the LAN map's
// content after each step.
func TestLargeSetLockWait(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FASTGW_LOCK_WAIT_PEERS"))
	if n <= 0 || n > 1<<24 {
		t.Skip("FASTGW_LOCK_WAIT_PEERS (peers, up to 16,777,216) not set: nothing to time")
	}
	r := newRouteRig(t, "lw", slog.DiscardHandler)
	dev, err := gateway.New(gateway.Options{Dataplane: r.d})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	key := func(i int) noise.PublicKey {
		var k noise.PublicKey
		k[0], k[1], k[2], k[3] = byte(i), byte(i>>8), byte(i>>16), 0x5d
		return k
	}
	var b strings.Builder
	for i := range n {
		v4 := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
		v6 := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 5, 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)}), 128)
		fmt.Fprintf(&b, "public_key=%s\nallowed_ip=%s\nallowed_ip=%s\n", key(i).Hex(), v4, v6)
	}
	took, worst, show := timeSet(t, dev, b.String())
	t.Logf("set of %d peers (%d prefixes): returned after %v; the device's lock kept a call waiting %v at most; wg show (IpcGet, once a second, of up to %d peers) took %v at most",
		n, 2*n, took.Round(time.Millisecond), worst.Round(time.Millisecond), n, show.Round(time.Millisecond))
	if got := len(excRouteSet(t, r)); got < 2*n-2 {
		t.Errorf("%d routes into the exception TUN after the set, want %d", got, 2*n)
	}

	b.Reset()
	kept := 0
	for i := range n {
		if i%10 == 0 {
			kept++
			continue
		}
		fmt.Fprintf(&b, "public_key=%s\nremove=true\n", key(i).Hex())
	}
	took, worst, show = timeSet(t, dev, b.String())
	t.Logf("set removing %d peers (%d prefixes): returned after %v; the device's lock kept a call waiting %v at most; wg show took %v at most",
		n-kept, 2*(n-kept), took.Round(time.Millisecond), worst.Round(time.Millisecond), show.Round(time.Millisecond))
	if got := lanMapLen(r.d); got != 2*kept {
		t.Errorf("%d prefixes in the LAN map after the removal, want %d", got, 2*kept)
	}

	t0 := time.Now()
	dev.Close()
	t.Logf("Close removing %d peers (%d prefixes): %v", kept, 2*kept, time.Since(t0).Round(time.Millisecond))
	if got := lanMapLen(r.d); got != 0 {
		t.Errorf("%d prefixes in the LAN map after Close, want 0", got)
	}
}

// lanMapLen is the number of prefixes in d's LAN map, as d counts them.
func lanMapLen(d *dataplane_) int {
	d.lock()
	defer d.mu.Unlock()
	return d.inMap[0].Len() + d.inMap[1].Len()
}

// timeSet sends body as one set request over a UAPI connection, as `wg
// addconf` and `wg syncconf` send it (applied in batches of lines:
// ipcSetConn, the lock let go between them), and returns how long it
// took to be answered, how long the device's lock kept WANAddrs waiting
// at most (probed every 10 ms) and how long an IpcGet (once a second)
// took at most meanwhile.
func timeSet(t *testing.T, dev *gateway.Device, body string) (took, worst, show time.Duration) {
	t.Helper()
	done := make(chan time.Duration, 1)
	start := time.Now()
	client, server := net.Pipe()
	go dev.ServeUAPI(server)
	defer client.Close()
	go func() {
		_, err := io.WriteString(client, "set=1\n"+body+"\n")
		if err != nil {
			t.Error(err)
		}
	}()
	go func() {
		reply, err := bufio.NewReader(client).ReadString('\n')
		if err != nil || reply != "errno=0\n" {
			t.Errorf("set: reply %q, %v", reply, err)
		}
		done <- time.Since(start)
	}()
	lastShow := start
	for {
		select {
		case took := <-done:
			return took, worst, show
		case <-time.After(10 * time.Millisecond):
		}
		t0 := time.Now()
		dev.WANAddrs()
		worst = max(worst, time.Since(t0))
		if time.Since(lastShow) >= time.Second {
			t0 = time.Now()
			if err := dev.IpcGet(io.Discard); err != nil {
				t.Error(err)
			}
			show = max(show, time.Since(t0))
			lastShow = time.Now()
		}
	}
}
