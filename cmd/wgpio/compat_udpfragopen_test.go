//go:build linux

package main

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/conn"

	"github.com/wgpio/wgpio/internal/testenv"
)

// noDFOn returns, for each family, whether the process's UDP sockets
// bound to port carry fragBind's options (IPv4: IP_PMTUDISC_DONT; IPv6:
// IPV6_PMTUDISC_DONT and IPV6_DONTFRAG off), and how many it found.
func noDFOn(t *testing.T, port uint16) (found int, ok [2]bool) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	ok = [2]bool{true, true}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		domain, on := udpSocketOn(fd, port)
		if !on {
			continue
		}
		found++
		switch domain {
		case unix.AF_INET:
			v, err := unix.GetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER)
			ok[0] = ok[0] && err == nil && v == unix.IP_PMTUDISC_DONT
		case unix.AF_INET6:
			v, err := unix.GetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER)
			df, err2 := unix.GetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_DONTFRAG)
			ok[1] = ok[1] && err == nil && err2 == nil && v == unix.IPV6_PMTUDISC_DONT && df == 0
		}
	}
	return found, ok
}

// TestFragBindReopen: the listen port moves (wg set listen-port: Close,
// then Open of another port), with listen-port 0 (a free port) and back to
// the first: after each Open the new sockets, both families', carry
// fragBind's options, and the single sends an EMSGSIZE turned on are off
// again. A Bind whose port has no socket of the process logs a warning
// and opens all the same.
func TestFragBindReopen(t *testing.T) {
	tp := testenv.Topology(t, "ur")
	ns := testenv.NS(t, tp, "a")
	var logs testenv.LogBuffer
	fb := &fragBind{Bind: conn.NewDefaultBind(), log: slog.New(slog.NewTextHandler(&logs, nil))}
	open := func(port uint16) uint16 {
		t.Helper()
		var actual uint16
		if err := ns.Do(func() (err error) {
			_, actual, err = fb.Open(port)
			return err
		}); err != nil {
			t.Fatalf("Open(%d): %v", port, err)
		}
		if port != 0 && actual != port {
			t.Fatalf("Open(%d) opened port %d", port, actual)
		}
		if found, ok := noDFOn(t, actual); found != 2 || !ok[0] || !ok[1] {
			t.Errorf("Open(%d): port %d: %d sockets, options set (IPv4, IPv6) %v; want 2 with both", port, actual, found, ok)
		}
		if fb.single[0].Load() || fb.single[1].Load() {
			t.Errorf("Open(%d): single sends still on", port)
		}
		return actual
	}
	first := open(0)
	for _, port := range []uint16{0, first + 1, first} {
		fb.single[0].Store(true) // as a batch's EMSGSIZE leaves them
		fb.single[1].Store(true)
		fb.Close()
		open(port)
	}
	fb.Close()
	if logs.String() != "" {
		t.Errorf("logged: %s", logs.String())
	}

	// A port without a socket of ours.
	stub := &fragBind{Bind: portBind{conn.NewDefaultBind(), 9}, log: slog.New(slog.NewTextHandler(&logs, nil))}
	if _, port, err := stub.Open(0); err != nil || port != 9 {
		t.Fatalf("Open with no socket found = %d, %v; want 9, nil", port, err)
	}
	if !strings.Contains(logs.String(), "may be lost instead of fragmented") || !strings.Contains(logs.String(), "no UDP socket") {
		t.Errorf("log %q, want the warning that no socket was found", logs.String())
	}
	if found, _ := noDFOn(t, 9); found != 0 {
		t.Errorf("%d sockets on port 9", found)
	}
}

// portBind is a Bind that opens nothing and says it opened port.
type portBind struct {
	conn.Bind
	port uint16
}

func (b portBind) Open(uint16) ([]conn.ReceiveFunc, uint16, error) { return nil, b.port, nil }
