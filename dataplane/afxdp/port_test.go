//go:build linux

package afxdp

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"golang.org/x/sys/unix"
)

// testEtherType is the IEEE local experimental EtherType 1, carried by the
// test frames that go both ways.
const testEtherType = 0x88b5

// sendTest transmits n test frames on tx, each tagged with tag and its
// sequence number. It keeps at most 128 frames uncompleted, so that the
// peer's veth ring (256 frames) never overflows even when its NAPI runs
// late on a loaded machine: in copy mode a frame completes once the peer
// has consumed its skb.
func sendTest(t *testing.T, tx dataplane.TX, src, dst net.HardwareAddr, tag uint16, n int) {
	t.Helper()
	frames := make([]dataplane.Frame, 32)
	deadline := time.Now().Add(5 * time.Second)
	inflight := 0
	for seq := 0; seq < n; {
		inflight -= tx.Reclaim()
		if inflight > 128 {
			if time.Now().After(deadline) {
				t.Fatalf("%d frames not completed", inflight)
			}
			time.Sleep(100 * time.Microsecond)
			continue
		}
		k := tx.Alloc(frames[:min(len(frames), n-seq)])
		for i := range k {
			f := &frames[i]
			f.SetLen(64)
			b := f.Data()
			copy(b[0:], dst)
			copy(b[6:], src)
			binary.BigEndian.PutUint16(b[12:], testEtherType)
			binary.BigEndian.PutUint16(b[14:], tag)
			binary.BigEndian.PutUint32(b[16:], uint32(seq+i))
		}
		m := tx.Transmit(frames[:k])
		tx.Free(frames[m:k])
		seq += m
		inflight += m
		if m < k || k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("transmit stalled after %d of %d frames; stats %+v", seq, n, tx.(*txHalf).q.Stats())
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// receiveTest receives until it has n test frames with tag from any queue
// of port, and checks each sequence number arrives once.
func receiveTest(t *testing.T, port dataplane.Port, tag uint16, n int) {
	t.Helper()
	seen := make([]bool, n)
	got := 0
	frames := make([]dataplane.Frame, 64)
	deadline := time.Now().Add(5 * time.Second)
	for got < n {
		idle := true
		for qi := range port.NumQueues() {
			rx := port.Queue(qi).RX()
			k := rx.Receive(frames)
			for i := range k {
				b := frames[i].Data()
				if binary.BigEndian.Uint16(b[12:]) != testEtherType || binary.BigEndian.Uint16(b[14:]) != tag {
					continue // the kernel's own frames (IPv6 autoconfiguration)
				}
				seq := binary.BigEndian.Uint32(b[16:])
				if int(seq) >= n || seen[seq] {
					t.Fatalf("frame %d (tag %d) unexpected or duplicated", seq, tag)
				}
				seen[seq] = true
				got++
			}
			rx.Free(frames[:k])
			idle = idle && k == 0
		}
		if idle {
			if time.Now().After(deadline) {
				t.Fatalf("received %d of %d frames with tag %d", got, n, tag)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

func TestFramesBothWays(t *testing.T) {
	for _, queues := range []int{1, 2} {
		t.Run(fmt.Sprintf("queues=%d", queues), func(t *testing.T) {
			p := newVethPair(t, queues)
			a := openIn(t, p.a, p.v.A, Config{Filter: Filter{All: true}})
			b := openIn(t, p.b, p.v.B, Config{Filter: Filter{All: true}})
			if a.NumQueues() != queues || b.NumQueues() != queues {
				t.Fatalf("NumQueues = %d, %d, want %d", a.NumQueues(), b.NumQueues(), queues)
			}
			const n = 1000
			for q := range queues {
				sendTest(t, a.Queue(q).TX(), p.macA, p.macB, uint16(q), n)
				receiveTest(t, b, uint16(q), n)
				sendTest(t, b.Queue(q).TX(), p.macB, p.macA, uint16(100+q), n)
				receiveTest(t, a, uint16(100+q), n)
			}
			sa, sb := a.Stats(), b.Stats()
			if sa.TXPackets != n*uint64(queues) || sb.TXPackets != n*uint64(queues) {
				t.Errorf("TXPackets = %d, %d, want %d", sa.TXPackets, sb.TXPackets, n*queues)
			}
			if sb.Backend["xdp_redirect_all"] < n*uint64(queues) {
				t.Errorf("B xdp_redirect_all = %d, want >= %d", sb.Backend["xdp_redirect_all"], n*queues)
			}
			t.Logf("native XDP %v, zero-copy %v; A stats %+v", a.NativeXDP(), a.ZeroCopy(), sa)
		})
	}
}

// forwardBack sends n test frames (tag 7) from a to b and forwards each
// that b receives to a's TX retagged 8, so that it comes back to b; it
// returns once b has received all n back. At most forwardWindow frames
// are on their way back at once (the rest wait, held, on b's side): the
// veth's queue toward b holds 256 frames, and a forwarding loop that
// outran b's NAPI on a loaded machine overfilled it, the frames dropped
// (as the port's driver_drop). A minute bounds only frames that never
// come back.
func forwardBack(t *testing.T, p *vethPair, a, b *Port, n int) {
	t.Helper()
	const forwardWindow = 64
	sendTest(t, a.Queue(0).TX(), p.macA, p.macB, 7, n)
	// Forward what B receives to A's TX, retagged 8: it goes to B again.
	frames := make([]dataplane.Frame, 64)
	var held []dataplane.Frame // received tag-7 frames not yet forwarded
	fwd, back := 0, 0
	deadline := time.Now().Add(time.Minute)
	for back < n {
		if time.Now().After(deadline) {
			t.Fatalf("forwarded %d, received back %d of %d; A %+v; B %+v", fwd, back, n, a.Stats(), b.Stats())
		}
		k := b.Queue(0).RX().Receive(frames)
		for i := range k {
			d := frames[i].Data()
			isTest := binary.BigEndian.Uint16(d[12:]) == testEtherType
			if isTest && binary.BigEndian.Uint16(d[14:]) == 7 {
				binary.BigEndian.PutUint16(d[14:], 8)
				held = append(held, frames[i])
				continue
			}
			if isTest && binary.BigEndian.Uint16(d[14:]) == 8 {
				back++
			}
			b.Queue(0).RX().Free(frames[i : i+1])
		}
		if w := min(len(held), forwardWindow-(fwd-back)); w > 0 {
			m := a.Queue(0).TX().Transmit(held[:w])
			fwd += m
			held = held[:copy(held, held[m:])]
		}
		if k == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

// TestSharedUMEM opens both ends of the pair on one UMEM (and then on two):
// frames received on B are transmitted on A's TX, a queue of another port.
// On one UMEM that takes no copy; on two, every frame is copied and
// counted.
func TestSharedUMEM(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			p := newVethPair(t, 1)
			var u *UMEM
			if shared {
				var err error
				if u, err = NewUMEM(UMEMConfig{NumFrames: 8192}); err != nil {
					t.Fatal(err)
				}
			}
			a := openIn(t, p.a, p.v.A, Config{UMEM: u, Filter: Filter{All: true}})
			b := openIn(t, p.b, p.v.B, Config{UMEM: u, Filter: Filter{All: true}})
			if a.SharedUMEM() != shared || b.SharedUMEM() != shared {
				t.Fatalf("SharedUMEM() = %v, %v, want %v", a.SharedUMEM(), b.SharedUMEM(), shared)
			}
			const n = 500
			forwardBack(t, p, a, b, n)
			want := uint64(0)
			if !shared {
				want = n
			}
			if got := a.Stats().Copies; got != want {
				t.Errorf("A Copies = %d, want %d", got, want)
			}
		})
	}
}

// udpEcho sends n datagrams from a kernel UDP socket in ns to dst and
// waits for each to come back (the kernel drops frames with bad checksums,
// so an echo proves the checksums).
func udpEcho(t *testing.T, ns *topo.NS, src netip.Addr, dst netip.AddrPort, n int) {
	t.Helper()
	var c *net.UDPConn
	if err := ns.Do(func() error {
		var err error
		c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 2048)
	for i := range n {
		msg := fmt.Sprintf("echo %d", i)
		ok := false
		for try := 0; try < 50 && !ok; try++ {
			if _, err := c.WriteToUDPAddrPort([]byte(msg), dst); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			for {
				k, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					break
				}
				if from == dst && string(buf[:k]) == msg {
					ok = true
					break
				}
			}
		}
		if !ok {
			t.Fatalf("datagram %d to %v: no echo", i, dst)
		}
	}
}

// tcpWorks opens a kernel TCP connection from ns a to a listener in ns b
// and exchanges data.
func tcpWorks(t *testing.T, a, b *topo.NS, addr netip.AddrPort) {
	t.Helper()
	var l net.Listener
	if err := b.Do(func() error {
		var err error
		l, err = net.Listen("tcp4", addr.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	var c net.Conn
	if err := a.Do(func() error {
		var err error
		c, err = net.DialTimeout("tcp4", addr.String(), 5*time.Second)
		return err
	}); err != nil {
		t.Fatalf("TCP connect through the port's interface: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	msg := strings.Repeat("wgpio ", 10000)
	go c.Write([]byte(msg))
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
		t.Fatalf("TCP echo: %v", err)
	}
}

// TestKernelPathAndChecksums reflects UDP to port 9000 with AF_XDP on B
// while a kernel TCP connection and ARP cross the same veth.
func TestKernelPathAndChecksums(t *testing.T) {
	p := newVethPair(t, 1)
	port := openIn(t, p.b, p.v.B, Config{Filter: Filter{UDP: []UDPMatch{{Addr: p.ipB, PortLo: 9000, PortHi: 9001}}}})
	stop := make(chan struct{})
	done := reflector(port, stop)
	defer func() { close(stop); <-done }()
	udpEcho(t, p.a, p.ipA, netip.AddrPortFrom(p.ipB, 9000), 100)
	tcpWorks(t, p.a, p.b, netip.AddrPortFrom(p.ipB, 9000)) // same port, TCP: not ours
	udpEcho(t, p.a, p.ipA, netip.AddrPortFrom(p.ipB, 9001), 10)
	st := port.Stats()
	if st.Backend["xdp_redirect_udp"] < 110 || st.Backend["xdp_pass"] == 0 {
		t.Errorf("counters redirect_udp %d pass %d, want >= 110 and > 0", st.Backend["xdp_redirect_udp"], st.Backend["xdp_pass"])
	}
	t.Logf("TX budget per sendto %d (XDP_MAX_TX_SKB_BUDGET raised: %v); stats: %+v",
		port.queues[0].sock.txBudget, port.queues[0].sock.txBudget > copyModeTXBudget, st)
}

// TestLogPartialChecksums: a port on a veth warns that the hosts beyond
// it must turn TX checksum offload off, naming the side and the fix; a
// port on another driver says nothing. Compat mode's gateway gave no such
// warning, and a new user's TCP through it stalled without a word.
func TestLogPartialChecksums(t *testing.T) {
	p := newVethPair(t, 1)
	port := openIn(t, p.b, p.v.B, Config{Filter: Filter{UDP: []UDPMatch{{Addr: p.ipB, PortLo: 9000, PortHi: 9000}}}})
	var logs testenv.LogBuffer
	port.LogPartialChecksums(slog.New(slog.NewTextHandler(&logs, nil)), "LAN")
	for _, want := range []string{"interface is a veth", "TX checksum offload off", "side=LAN", "interface=" + p.v.B, `fix="ethtool -K <the other end> tx off"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("LogPartialChecksums on veth %s logged:\n%s\nwant it to contain %q", p.v.B, logs.String(), want)
		}
	}
	var quiet testenv.LogBuffer
	(&Port{name: "eth0", driver: "mlx5_core"}).LogPartialChecksums(slog.New(slog.NewTextHandler(&quiet, nil)), "LAN")
	if quiet.String() != "" {
		t.Errorf("LogPartialChecksums on mlx5_core logged %q, want nothing", quiet.String())
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestCloseReopen opens and closes the same interface three times; each
// time the reflector works, and afterwards no fd or goroutine is left.
func TestCloseReopen(t *testing.T) {
	p := newVethPair(t, 2)
	cfg := Config{Filter: Filter{UDP: []UDPMatch{{Addr: p.ipB, PortLo: 9000, PortHi: 9000}}}}
	// Warm up what the runtime keeps (netpoller, netlink) before counting.
	openIn(t, p.b, p.v.B, cfg).Close()
	fds, gs := countFDs(t), runtime.NumGoroutine()
	for range 3 {
		var port *Port
		if err := p.b.Do(func() error {
			var err error
			port, err = Open(p.v.B, cfg)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		done := reflector(port, stop)
		udpEcho(t, p.a, p.ipA, netip.AddrPortFrom(p.ipB, 9000), 5)
		close(stop)
		<-done
		if err := port.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := port.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
	// The reflector's and the port's goroutines end soon after Close: on
	// a busy machine that can take seconds. A leak never ends.
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, g := countFDs(t), runtime.NumGoroutine()
		if f <= fds && g <= gs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leak: %d fds and %d goroutines, had %d and %d", f, g, fds, gs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if attached(t, p.b, p.v.B) {
		t.Error("XDP program still attached after Close")
	}
	udpKernel(t, p)
}

// attached reports whether an XDP program is attached to dev.
func attached(t *testing.T, ns *topo.NS, dev string) bool {
	t.Helper()
	l, err := ns.Handle().LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	x := l.Attrs().Xdp
	return x != nil && (x.Attached || x.ProgId != 0)
}

// udpKernel checks a datagram from A reaches a kernel socket on B port
// 9000 (nothing of ours intercepts it).
func udpKernel(t *testing.T, p *vethPair) {
	t.Helper()
	var srv *net.UDPConn
	if err := p.b.Do(func() error {
		var err error
		srv, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.ipB, 9000)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	udpEcho(t, p.a, p.ipA, netip.AddrPortFrom(p.ipB, 9000), 3)
}

const helperEnv = "WGPIO_AFXDP_HELPER"

// TestHelperProcess is the child of TestSIGKILL and TestOpenPrivileges.
// WGPIO_AFXDP_HELPER is "MODE NS DEV": it enters namespace NS and opens
// DEV; MODE "hold" says "ready" and waits to be killed, "nocap" first drops
// every capability, "memlock" drops CAP_IPC_LOCK and CAP_SYS_RESOURCE and
// lowers RLIMIT_MEMLOCK to 64 KiB; those two print the error.
func TestHelperProcess(t *testing.T) {
	arg := os.Getenv(helperEnv)
	if arg == "" {
		t.Skip("helper process for TestSIGKILL and TestOpenPrivileges")
	}
	var mode, nsName, dev string
	fmt.Sscan(arg, &mode, &nsName, &dev)
	runtime.LockOSThread()
	h, err := netns.GetFromName(nsName)
	if err == nil {
		err = netns.Set(h)
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	switch mode {
	case "nocap":
		err = setCaps(func(c uint64) uint64 { return 0 })
	case "memlock":
		rl := unix.Rlimit{Cur: 64 << 10, Max: 64 << 10}
		if err = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &rl); err == nil {
			err = setCaps(func(c uint64) uint64 { return c &^ (1<<unix.CAP_IPC_LOCK | 1<<unix.CAP_SYS_RESOURCE) })
		}
	}
	if err != nil {
		fmt.Println("error: set up:", err)
		os.Exit(1)
	}
	addr := netip.MustParseAddr("198.18.7.2")
	_, err = Open(dev, Config{Filter: Filter{UDP: []UDPMatch{{Addr: addr, PortLo: 9000, PortHi: 9000}}}})
	if mode != "hold" {
		fmt.Printf("permission=%v memlock=%v %v\n", errors.Is(err, ErrPermission), errors.Is(err, ErrMemlock), err)
		os.Exit(0)
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	select {}
}

// setCaps changes the calling thread's effective and permitted
// capabilities with f.
func setCaps(f func(uint64) uint64) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var d [2]unix.CapUserData
	if err := unix.Capget(&hdr, &d[0]); err != nil {
		return err
	}
	eff := f(uint64(d[0].Effective) | uint64(d[1].Effective)<<32)
	perm := f(uint64(d[0].Permitted) | uint64(d[1].Permitted)<<32)
	d[0].Effective, d[1].Effective = uint32(eff), uint32(eff>>32)
	d[0].Permitted, d[1].Permitted = uint32(perm), uint32(perm>>32)
	return unix.Capset(&hdr, &d[0])
}

// helper starts the test binary as TestHelperProcess.
func helper(mode string, ns *topo.NS, dev string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode+" "+ns.Name+" "+dev)
	return cmd
}

// TestSIGKILL kills a process holding a port: the kernel must detach the
// program and the interface pass traffic to the kernel again.
func TestSIGKILL(t *testing.T) {
	p := newVethPair(t, 1)
	cmd := helper("hold", p.b, p.v.B)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q", line)
	}
	if !attached(t, p.b, p.v.B) {
		t.Fatal("helper ready but no XDP program attached")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for attached(t, p.b, p.v.B) {
		if time.Now().After(deadline) {
			t.Fatal("XDP program still attached 5 s after SIGKILL")
		}
		time.Sleep(10 * time.Millisecond)
	}
	udpKernel(t, p)
}

// TestOpenPrivileges opens a port in processes that lack privileges.
func TestOpenPrivileges(t *testing.T) {
	p := newVethPair(t, 1)
	for _, tt := range []struct{ mode, want string }{
		{"nocap", "permission=true memlock=false"},
		{"memlock", "permission=false memlock=true"},
	} {
		out, err := helper(tt.mode, p.b, p.v.B).CombinedOutput()
		if err != nil {
			t.Fatalf("helper %s: %v: %s", tt.mode, err, out)
		}
		if !strings.HasPrefix(string(out), tt.want) {
			t.Errorf("Open as %s: %s, want %s", tt.mode, out, tt.want)
		}
		t.Logf("%s: %s", tt.mode, strings.TrimSpace(string(out)))
	}
	if attached(t, p.b, p.v.B) {
		t.Error("XDP program attached after failed Opens")
	}
}

// TestOpenErrors checks the errors name the cause.
func TestOpenErrors(t *testing.T) {
	p := newVethPair(t, 1)
	for _, tt := range []struct {
		name string
		dev  string
		cfg  Config
		want error
	}{
		{"no such interface", "wgpio-none0", Config{}, ErrNoSuchInterface},
		{"queue out of range", p.v.B, Config{Queues: 2}, dataplane.ErrNoSuchQueue},
		{"zero-copy on veth", p.v.B, Config{Mode: ModeZeroCopy}, ErrXDPUnsupported},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := p.b.Do(func() error {
				port, err := Open(tt.dev, tt.cfg)
				if err == nil {
					port.Close()
				}
				return err
			})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Open(%s, %+v) = %v, want %v", tt.dev, tt.cfg, err, tt.want)
			}
			t.Logf("%v", err)
		})
	}
	// Native XDP on veth with the peer's MTU above 3506.
	la, err := p.a.Handle().LinkByName(p.v.A)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.a.Handle().LinkSetMTU(la, 9000); err != nil {
		t.Fatal(err)
	}
	err = p.b.Do(func() error {
		port, err := Open(p.v.B, Config{Attach: AttachNative})
		if err == nil {
			port.Close()
		}
		return err
	})
	if !errors.Is(err, ErrMTUTooLarge) {
		t.Fatalf("Open native with peer MTU 9000 = %v, want ErrMTUTooLarge", err)
	}
	// The fix names this end, and the peer's namespace for the other
	// (it said "ip link set dev PEER").
	if want := "ip link set dev " + p.v.B + " mtu 1500, and in the peer's network namespace ip link set dev ITS-PEER mtu 1500"; !strings.Contains(err.Error(), want) {
		t.Errorf("Open native with peer MTU 9000 = %v, want %q in it", err, want)
	}
	t.Logf("%v", err)
	// Auto falls back to generic.
	port := openIn(t, p.b, p.v.B, Config{})
	if port.NativeXDP() || port.NativeXDPError() == nil {
		t.Errorf("auto with peer MTU 9000: native %v, error %v; want generic with a reason", port.NativeXDP(), port.NativeXDPError())
	}
	_ = netlink.LinkAttrs{}
}
