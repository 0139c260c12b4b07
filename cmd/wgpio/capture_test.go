//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testing/sockettest"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestPCAPWriter checks the bytes against the pcapng format
// (draft-ietf-opsawg-pcapng: Section Header Block, Interface Description
// Blocks with if_name and if_tsresol, Enhanced Packet Block with
// epb_flags), little-endian.
func TestPCAPWriter(t *testing.T) {
	var b bytes.Buffer
	w, err := newPCAPWriter(&b, 1518)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1700000000, 123456789)
	if err := w.writePacket(ts, fastpath.CaptureWAN, fastpath.CaptureTX, []byte{0xde, 0xad, 0xbe}, 60); err != nil {
		t.Fatal(err)
	}
	idb := func(name string) []byte {
		return []byte{
			0x01, 0x00, 0x00, 0x00, // IDB
			0x28, 0x00, 0x00, 0x00, // 40 bytes
			0x01, 0x00, 0x00, 0x00, // LINKTYPE_ETHERNET, reserved
			0xee, 0x05, 0x00, 0x00, // snap length 1518
			0x02, 0x00, 0x03, 0x00, name[0], name[1], name[2], 0, // if_name
			0x09, 0x00, 0x01, 0x00, 0x09, 0, 0, 0, // if_tsresol: 10^-9 s
			0x00, 0x00, 0x00, 0x00, // opt_endofopt
			0x28, 0x00, 0x00, 0x00,
		}
	}
	ns := uint64(ts.UnixNano())
	var hi, lo [4]byte
	binary.LittleEndian.PutUint32(hi[:], uint32(ns>>32))
	binary.LittleEndian.PutUint32(lo[:], uint32(ns))
	want := slices.Concat([]byte{
		0x0a, 0x0d, 0x0d, 0x0a, // SHB
		0x1c, 0x00, 0x00, 0x00, // 28 bytes
		0x4d, 0x3c, 0x2b, 0x1a, // byte-order magic
		0x01, 0x00, 0x00, 0x00, // version 1.0
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // section length unknown
		0x1c, 0x00, 0x00, 0x00,
	}, idb("lan"), idb("wan"), []byte{
		0x06, 0x00, 0x00, 0x00, // EPB
		0x30, 0x00, 0x00, 0x00, // 48 bytes
		0x01, 0x00, 0x00, 0x00, // interface 1: wan
	}, hi[:], lo[:], []byte{
		0x03, 0x00, 0x00, 0x00, // captured length 3
		0x3c, 0x00, 0x00, 0x00, // original length 60
		0xde, 0xad, 0xbe, 0x00, // data, padded
		0x02, 0x00, 0x04, 0x00, 0x02, 0x00, 0x00, 0x00, // epb_flags: outbound
		0x00, 0x00, 0x00, 0x00, // opt_endofopt
		0x30, 0x00, 0x00, 0x00,
	})
	if diff := cmp.Diff(want, b.Bytes()); diff != "" {
		t.Errorf("pcapng bytes (-want +got):\n%s", diff)
	}
}

func TestCaptureRequestFilter(t *testing.T) {
	for _, tc := range []struct {
		req     captureRequest
		want    fastpath.CaptureFilter
		wantErr bool
	}{
		{captureRequest{}, fastpath.CaptureFilter{}, false},
		{captureRequest{Port: "any", Dir: "any"}, fastpath.CaptureFilter{}, false},
		{captureRequest{Port: "wan", Dir: "rx"}, fastpath.CaptureFilter{Port: fastpath.CaptureWAN, Dir: fastpath.CaptureRX}, false},
		{captureRequest{Port: "lan", Dir: "tx", Proto: 17, L4Port: 53}, fastpath.CaptureFilter{Port: fastpath.CaptureLAN, Dir: fastpath.CaptureTX, Proto: 17, L4Port: 53}, false},
		{captureRequest{Host: "198.18.1.1"}, fastpath.CaptureFilter{Host: netip.MustParseAddr("198.18.1.1")}, false},
		{captureRequest{Host: "::ffff:198.18.1.1"}, fastpath.CaptureFilter{Host: netip.MustParseAddr("198.18.1.1")}, false},
		{captureRequest{Port: "eth0"}, fastpath.CaptureFilter{}, true},
		{captureRequest{Dir: "in"}, fastpath.CaptureFilter{}, true},
		{captureRequest{Host: "example.com"}, fastpath.CaptureFilter{}, true},
	} {
		got, err := tc.req.filter()
		if (err != nil) != tc.wantErr {
			t.Errorf("%+v.filter() error = %v, want error %v", tc.req, err, tc.wantErr)
			continue
		}
		if err == nil && got != tc.want {
			t.Errorf("%+v.filter() = %+v, want %+v", tc.req, got, tc.want)
		}
	}
}

func TestReorder(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"wg0"}, []string{"wg0"}},
		{[]string{"wg0", "-port", "wan", "-c", "5"}, []string{"-port", "wan", "-c", "5", "wg0"}},
		{[]string{"-port=wan", "wg0", "-w", "x.pcap"}, []string{"-port=wan", "-w", "x.pcap", "wg0"}},
		{[]string{"-h"}, []string{"-h"}},
		{[]string{"-port", "lan", "--", "-odd"}, []string{"-port", "lan", "-odd"}},
	} {
		if got := reorder(tc.in); !cmp.Equal(got, tc.want) {
			t.Errorf("reorder(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzCaptureRequest: any request line a client sends the capture socket
// is either refused with an error or turned into a filter, never a panic.
func FuzzCaptureRequest(f *testing.F) {
	f.Add([]byte(`{"port":"wan","dir":"rx"}`))                    // the common case
	f.Add([]byte(`{"host":"2001:db8::1","proto":58,"l4port":0}`)) // IPv6 host
	f.Add([]byte(`{"snaplen":-5}`))                               // bad snap length: NewCapture refuses it
	f.Add([]byte(`not json`))                                     // garbage
	f.Fuzz(func(t *testing.T, line []byte) {
		var req captureRequest
		if json.Unmarshal(line, &req) != nil {
			return
		}
		if _, err := req.filter(); err != nil {
			return
		}
		if c, err := fastpath.NewCapture(fastpath.CaptureConfig{SnapLen: req.SnapLen, Ring: 1}); err == nil && c == nil {
			t.Fatal("NewCapture returned nil without an error")
		}
	})
}

// nowhere resolves nothing.
type nowhere struct{}

func (nowhere) Resolve(netip.Addr) ([6]byte, bool) { return [6]byte{}, false }

// startCapture runs a capture server on an engine over memports and
// returns the name it serves, the LAN's host end (to send frames the
// engine receives) and the server's stop function (also called at
// cleanup unless it was called).
func startCapture(t *testing.T) (name string, host *memport.Port, stop func()) {
	t.Helper()
	testenv.Root(t)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	lan, host, err := memport.NewPair(memport.Config{Name: "cl"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lan.Close(); host.Close() })
	wan, wanPeer, err := memport.NewPair(memport.Config{Name: "cw"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wan.Close(); wanPeer.Close() })
	e, err := fastpath.New(fastpath.Config{LAN: lan, WAN: wan, ListenPort: 51820,
		WANAddr4: netip.MustParseAddr("198.18.0.1"), WANResolver: nowhere{}, LANResolver: nowhere{}})
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	t.Cleanup(func() { e.Close() })
	name = topo.UniqueName("wgpc")
	stopServer, err := serveCapture(name, e, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(stopServer) }
	t.Cleanup(stop)
	return name, host, stop
}

// TestCaptureStopWithStalledClient: stopping the capture server (the
// gateway shutting down) does not wait for ever on a capture client that
// stopped reading (a `wgpio capture` suspended with Ctrl-Z, a pipe into a
// stuck reader) while its stream was being written.
func TestCaptureStopWithStalledClient(t *testing.T) {
	name, host, stop := startCapture(t)
	c, err := net.Dial("unix", filepath.Join(runDir, name+".capture"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := json.NewEncoder(c).Encode(captureRequest{Port: "lan", Dir: "rx"}); err != nil {
		t.Fatal(err)
	}
	// Read the reply, then stop reading while the LAN receives frames
	// enough to fill the socket buffer many times over.
	if _, err := bufio.NewReader(c).ReadBytes('\n'); err != nil {
		t.Fatalf("read reply: %v", err)
	}
	payload := make([]byte, 1400)
	tx := host.Queue(0).TX()
	for range 4000 {
		var f [1]dataplane.Frame
		if tx.Alloc(f[:]) == 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		f[0].SetLen(len(payload))
		copy(f[0].Data(), payload)
		tx.Transmit(f[:])
	}
	// The server is stuck in a write once the client's receive queue is
	// full, the rest of the 5.6 MB still to come.
	waitReceiveQueue(t, c, 64<<10)
	done := make(chan struct{})
	go func() {
		stop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("stopping the capture server still waits after 10 s for a client that stopped reading")
	}
}

// TestCaptureRequestTooLong: a request line without end (8 MiB, no
// newline) is answered with an error once it passes maxCaptureRequest
// bytes, and the server's heap does not grow with it.
func TestCaptureRequestTooLong(t *testing.T) {
	name, _, _ := startCapture(t)
	c, err := net.Dial("unix", filepath.Join(runDir, name+".capture"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	go func() {
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for range 128 {
			if _, err := c.Write(chunk); err != nil {
				return // the server answered and closed
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	var rep captureReply
	if err != nil || json.Unmarshal(line, &rep) != nil || !strings.Contains(rep.Error, "longer than") {
		t.Fatalf("reply to an endless request line = %q, %v; want an error saying it is too long", line, err)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 4<<20 {
		t.Errorf("heap grew %d bytes while the request line was read, want under 4 MiB", grew)
	}
}

// openPTY opens a pseudo-terminal pair and returns its terminal end (the
// one a shell's stdout would be), closed at the end of the test.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal (%v): mount devpts at /dev/pts", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestCaptureRefusesTerminal: `wgpio capture NAME` without -w at a shell
// prompt wrote the binary pcapng stream onto the terminal. It now refuses
// before it connects, saying how to write a file or pipe into a reader;
// with stdout redirected (a file, /dev/null, a pipe) it goes on.
func TestCaptureRefusesTerminal(t *testing.T) {
	tty := openPTY(t)
	if !isTerminal(tty) {
		t.Fatalf("isTerminal(%s) = false, want true", tty.Name())
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	if isTerminal(devnull) {
		t.Errorf("isTerminal(%s) = true, want false (a character device, not a terminal)", os.DevNull)
	}
	stdout := os.Stdout
	defer func() { os.Stdout = stdout }()
	os.Stdout = tty
	err = cmdCapture([]string{"nosuchgw0"})
	want := "capture: standard output is a terminal, where pcapng is unreadable: write a file (-w nosuchgw0.pcapng"
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "| tshark -r -") {
		t.Errorf("capture to a terminal: error %v, want %q…, with a pipe into tshark", err, want)
	}
	os.Stdout = devnull
	if err := cmdCapture([]string{"nosuchgw0"}); err == nil || strings.Contains(err.Error(), "terminal") {
		t.Errorf("capture to %s: error %v, want the gateway's absence, not the terminal", os.DevNull, err)
	}
	if err := cmdCapture([]string{"-w", filepath.Join(t.TempDir(), "x.pcapng"), "nosuchgw0"}); err == nil || strings.Contains(err.Error(), "terminal") {
		t.Errorf("capture -w FILE: error %v, want the gateway's absence, not the terminal", err)
	}
}

// TestCaptureConnectionsBounded: a client that opens many more
// connections to the capture socket than captureConns and sends nothing
// costs at most captureConns handlers: as many more wait for a place,
// the rest are closed at once. Before, each had a goroutine and a
// buffer of its own for captureRequestTimeout.
func TestCaptureConnectionsBounded(t *testing.T) {
	const over = 40
	name, _, _ := startCapture(t)
	path := filepath.Join(runDir, name+".capture")
	base := runtime.NumGoroutine()
	dial := func() net.Conn { return sockettest.Dial(t, path) }
	for range 2 * captureConns {
		dial()
	}
	for i := range over {
		if !sockettest.ClosedWithin(dial(), time.Second) {
			t.Fatalf("connection %d over %d served and %d waiting: not closed within 1 s", i, captureConns, captureConns)
		}
	}
	if g := runtime.NumGoroutine() - base; g > captureConns+4 {
		t.Errorf("%d goroutines more with %d silent connections open, want at most %d", g, 2*captureConns+over, captureConns+4)
	}
}
