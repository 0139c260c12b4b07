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
// second) while the set ran: README, "Large configurations".
// Skipped unless the variable is set: it measures, it checks nothing.
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
	var b strings.Builder
	for i := range n {
		var k noise.PublicKey
		k[0], k[1], k[2], k[3] = byte(i), byte(i>>8), byte(i>>16), 0x5d
		v4 := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
		v6 := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 5, 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)}), 128)
		fmt.Fprintf(&b, "public_key=%s\nallowed_ip=%s\nallowed_ip=%s\n", k.Hex(), v4, v6)
	}
	done := make(chan time.Duration, 1)
	start := time.Now()
	// Over a UAPI connection, as `wg addconf` sends it: applied in
	// batches of lines (ipcSetConn), the lock let go between them.
	client, server := net.Pipe()
	go dev.ServeUAPI(server)
	defer client.Close()
	go func() {
		_, err := io.WriteString(client, "set=1\n"+b.String()+"\n")
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
	var worst time.Duration
	var show time.Duration
	lastShow := start
	for {
		select {
		case took := <-done:
			t.Logf("set of %d peers (%d prefixes): returned after %v; the device's lock kept a call waiting %v at most; wg show (IpcGet, once a second, of up to %d peers) took %v at most",
				n, 2*n, took.Round(time.Millisecond), worst.Round(time.Millisecond), n, show.Round(time.Millisecond))
			got := len(excRouteSet(t, r))
			if got < 2*n-2 {
				t.Errorf("%d routes into the exception TUN after the set, want %d", got, 2*n)
			}
			return
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
