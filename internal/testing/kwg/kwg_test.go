//go:build linux

package kwg_test

import (
	"debug/elf"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/kwg"
	"github.com/wgpio/wgpio/internal/topo"
)

// The interop topology, every address in 198.18.0.0/15 and only inside the
// namespaces the tests make:
//
//	LAN host ns ── veth ── wgpio ns ── tap ── qemu guest (Debian kernel, wireguard.ko)
//	198.19.60.10/24   198.19.60.1/24  198.18.50.1/24      eth0 198.18.50.2/24
//	                  tunnel 198.19.50.1/24 <══ WireGuard ══> wg0 198.19.50.2/24
//
// The guest routes 198.19.50.1/32 and 198.19.60.0/24 into wg0 (its allowed
// IPs for us); wgpio allows 198.19.50.2/32 from the guest.
var (
	tapAddr     = netip.MustParsePrefix("198.18.50.1/24")
	guestAddr   = netip.MustParsePrefix("198.18.50.2/24")
	guestTunnel = netip.MustParsePrefix("198.19.50.2/24")
	ourTunnel   = netip.MustParsePrefix("198.19.50.1/24")
	lanGateway  = netip.MustParsePrefix("198.19.60.1/24")
	lanHost     = netip.MustParsePrefix("198.19.60.10/24")
	lanNet      = netip.MustParsePrefix("198.19.60.0/24")
	ourPort     = uint16(51820)
	ourEndpoint = netip.AddrPortFrom(tapAddr.Addr(), ourPort)
	guestEP     = netip.AddrPortFrom(guestAddr.Addr(), 51820)
	guestAllow  = netip.PrefixFrom(guestTunnel.Addr(), 32)
	echoAddr    = netip.AddrPortFrom(guestTunnel.Addr(), 7)
)

// Traffic of each check, as kwg-check.sh sends it.
var (
	udpSizes = []int{1, 64, 512, 1000, 1392}
	tcpBytes = 1 << 20
	pingMax  = 1420 - 28 // full-MTU inner packets
)

var (
	envOnce sync.Once
	envVal  *kwg.Env
	envErr  error
)

// requireGuest checks what a guest needs and prepares the cache once per
// test binary.
func requireGuest(t *testing.T) *kwg.Env {
	t.Helper()
	testenv.Short(t, "boots a qemu guest (about a minute under TCG)")
	testenv.Root(t)
	testenv.Tool(t, "qemu-system-x86_64", "qemu-system-x86")
	for _, tool := range [][2]string{
		{"ip", "iproute2"}, {"wg", "wireguard-tools"}, {"ping", "iputils-ping"},
		{"cpio", "cpio"}, {"depmod", "kmod"}, {"modprobe", "kmod"}, {"gzip", "gzip"},
		{"dpkg-deb", "dpkg"}, {"apt-get", "apt"},
	} {
		testenv.Tool(t, tool[0], tool[1])
	}
	if f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0); err != nil {
		testenv.Missing(t, "/dev/net/tun", "load the tun module or run with access to /dev/net/tun: "+err.Error())
	} else {
		f.Close()
	}
	if !staticELF("/bin/busybox") {
		testenv.Missing(t, "a static /bin/busybox for the guest", "apt-get install busybox-static")
	}
	envOnce.Do(func() {
		envVal, envErr = kwg.Prepare("", t.Logf)
	})
	if envErr != nil {
		t.Fatalf("prepare the guest: %v", envErr)
	}
	return envVal
}

// staticELF reports whether path is an ELF executable without an
// interpreter.
func staticELF(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// counters are a wgpio control plane's handshake counters.
type counters struct {
	InitiationsSent, ResponsesSent, Sessions uint64
	Invalid                                  uint64 // handshake messages it refused
}

// peer is the wgpio side under test.
type peer struct {
	// probe is the namespace the host-side traffic starts in.
	probe *topo.NS
	// guestTargets are what the guest pings through the tunnel.
	guestTargets []netip.Addr
	// restart drops every session of ours (a fresh process).
	restart func() error
	// counters reads the control plane's handshake counters; nil for stock
	// wireguard-go.
	counters func() counters
	// log is the peer's log so far.
	log func() string
	// final checks the peer's own view at the end (may be nil).
	final func(t *testing.T)
}

// interop runs kwg-check.sh's checks against p: the kernel initiates (p
// fresh), p initiates (p restarted, the kernel still has its session), the
// kernel re-initiates (guest wg0 recreated, p keeps its session), then the
// guest's final state.
type interop struct {
	t      *testing.T
	g      *kwg.Guest
	p      peer
	ourPub kwg.Key
	wgLog  strings.Builder // the guest's WireGuard messages, every check
}

// newInterop registers the failure report: on failure the test output
// gets the guest console, qemu's output, the guest's WireGuard log and the
// peer's log. Register it after the guest's Close so that it runs first.
func newInterop(t *testing.T, g *kwg.Guest, p peer, ourPub kwg.Key) *interop {
	in := &interop{t: t, g: g, p: p, ourPub: ourPub}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		t.Logf("guest console (%s):\n%s", g.Dir(), g.Console())
		t.Logf("qemu output:\n%s", g.QemuLog())
		if out, err := g.WireGuardLog(); err == nil {
			in.wgLog.WriteString("### at failure\n" + out)
		}
		t.Logf("guest WireGuard log:\n%s", in.wgLog.String())
		t.Logf("peer log:\n%s", p.log())
	})
	return in
}

var forbidden = regexp.MustCompile(`(?i)invalid handshake|invalid MAC|unallowed src IP`)

// events fetches and clears the guest's WireGuard log and requires every
// pattern in it, and none of the forbidden lines.
func (in *interop) events(name string, want ...string) {
	t := in.t
	t.Helper()
	out, err := in.g.WireGuardLog()
	if err != nil {
		t.Errorf("%s: read the guest's WireGuard log: %v", name, err)
		return
	}
	fmt.Fprintf(&in.wgLog, "### %s\n%s", name, out)
	for _, w := range want {
		if !regexp.MustCompile(w).MatchString(out) {
			t.Errorf("%s: guest WireGuard log lacks %q; got:\n%s", name, w, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if forbidden.MatchString(l) {
			t.Errorf("%s: guest WireGuard log: %s", name, l)
		}
	}
}

// Patterns of the guest kernel's dynamic-debug messages
// (drivers/net/wireguard/{send,receive,noise}.c, Linux 6.1). A "Receiving
// handshake ..." line is printed only after the message passed MAC1 and
// decryption, so it shows that the kernel found ours valid.
func recvFromUs(msg string) string {
	return `Receiving handshake ` + msg + ` from peer \d+ \(` + regexp.QuoteMeta(ourEndpoint.String()) + `\)`
}

func sendToUs(msg string) string {
	return `Sending handshake ` + msg + ` to peer \d+ \(` + regexp.QuoteMeta(ourEndpoint.String()) + `\)`
}

const keypairCreated = `Keypair \d+ created for peer \d+`

// guestPing pings p's targets from the guest; the first ping carries the
// kernel's handshake.
func (in *interop) guestPing(name string) bool {
	t := in.t
	t.Helper()
	var cmd []string
	for i, a := range in.p.guestTargets {
		if i == 0 {
			cmd = append(cmd, fmt.Sprintf("ping -c 1 -W 15 %s", a))
		}
		cmd = append(cmd, fmt.Sprintf("ping -c 2 -W 5 %s", a))
	}
	out, err := in.g.Ctl(90*time.Second, strings.Join(cmd, " && "))
	if err != nil {
		t.Errorf("%s: guest ping: %v", name, err)
		return false
	}
	t.Logf("%s: guest ping ok: %s", name, lastLine(out, "round-trip"))
	return true
}

func lastLine(s, prefix string) string {
	r := ""
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, prefix) {
			r = strings.TrimSpace(l)
		}
	}
	return r
}

// traffic sends kwg-check.sh's host-side traffic from the probe namespace
// to the guest's tunnel address: ping, full-MTU ping with DF, UDP echo of
// each size and a TCP echo, verified byte for byte.
func (in *interop) traffic(name string) {
	t := in.t
	t.Helper()
	ns, dst := in.p.probe, guestTunnel.Addr().String()
	if out, err := ns.Run("ping", "-c", "3", "-i", "0.3", "-W", "5", dst); err != nil {
		t.Errorf("%s: ping %s: %v", name, dst, err)
		return
	} else {
		t.Logf("%s: ping %s: %s", name, dst, lastLine(out, "rtt"))
	}
	if _, err := ns.Run("ping", "-c", "2", "-i", "0.3", "-W", "5", "-M", "do", "-s", fmt.Sprint(pingMax), dst); err != nil {
		t.Errorf("%s: ping -M do -s %d: %v", name, pingMax, err)
	}
	if err := kwg.UDPEcho(ns, echoAddr, udpSizes, 30*time.Second); err != nil {
		t.Errorf("%s: %v", name, err)
	}
	if d, err := kwg.TCPEcho(ns, echoAddr, tcpBytes, 60*time.Second); err != nil {
		t.Errorf("%s: %v", name, err)
	} else {
		t.Logf("%s: TCP echo of %d bytes each way in %v", name, tcpBytes, d.Round(time.Millisecond))
	}
}

func (in *interop) counters() counters {
	if in.p.counters == nil {
		return counters{}
	}
	return in.p.counters()
}

// run runs the three checks and the final state check.
func (in *interop) run() {
	t := in.t
	// Check 1: the kernel initiates; our side is fresh and responds.
	c0 := in.counters()
	in.guestPing("check 1 (kernel initiates)")
	in.events("check 1 (kernel initiates)", sendToUs("initiation"), recvFromUs("response"), keypairCreated)
	if in.p.counters != nil {
		c := in.counters()
		if c.ResponsesSent <= c0.ResponsesSent || c.Sessions <= c0.Sessions || c.InitiationsSent != c0.InitiationsSent {
			t.Errorf("check 1: wgpio counters %+v, want a response sent and a session, no initiation (before: %+v)", c, c0)
		}
	}
	in.traffic("check 1 traffic")

	// Check 2: we restart without a session and initiate.
	if err := in.p.restart(); err != nil {
		t.Fatalf("check 2: restart our side: %v", err)
	}
	c0 = in.counters()
	in.traffic("check 2 (wgpio initiates)")
	in.events("check 2 (wgpio initiates)", recvFromUs("initiation"), sendToUs("response"), keypairCreated)
	if in.p.counters != nil {
		c := in.counters()
		if c.InitiationsSent <= c0.InitiationsSent || c.Sessions <= c0.Sessions || c.ResponsesSent != c0.ResponsesSent {
			t.Errorf("check 2: wgpio counters %+v, want an initiation sent and a session, no response (before: %+v)", c, c0)
		}
	}

	// Check 3: the kernel drops its state and initiates while we still
	// hold a session.
	c0 = in.counters()
	if _, err := in.g.Ctl(30*time.Second, "kwg-wg-up -r"); err != nil {
		t.Errorf("check 3: recreate guest wg0: %v", err)
	}
	in.guestPing("check 3 (kernel re-initiates)")
	in.events("check 3 (kernel re-initiates)", sendToUs("initiation"), recvFromUs("response"), keypairCreated)
	if d, err := kwg.TCPEcho(in.p.probe, echoAddr, tcpBytes, 60*time.Second); err != nil {
		t.Errorf("check 3 traffic: %v", err)
	} else {
		t.Logf("check 3 traffic: TCP echo of %d bytes each way in %v", tcpBytes, d.Round(time.Millisecond))
	}
	if in.p.counters != nil {
		c := in.counters()
		if c.ResponsesSent <= c0.ResponsesSent || c.Sessions <= c0.Sessions {
			t.Errorf("check 3: wgpio counters %+v, want another response and session (before: %+v)", c, c0)
		}
		if c.Invalid != 0 {
			t.Errorf("wgpio refused %d handshake messages from the kernel", c.Invalid)
		}
	}
	in.events("final")

	// Final: the kernel's view of us.
	d, err := in.g.Dump(in.ourPub)
	if err != nil {
		t.Error(err)
	} else if d.Endpoint != ourEndpoint.String() || d.LastHandshake <= 0 || d.RxBytes == 0 || d.TxBytes == 0 {
		t.Errorf("guest wg show wg0 dump: %q, want endpoint %v, a handshake and transfer both ways", d.Line, ourEndpoint)
	} else {
		t.Logf("guest wg show wg0 dump: endpoint %s, latest handshake %d, rx %d B, tx %d B", d.Endpoint, d.LastHandshake, d.RxBytes, d.TxBytes)
	}
	out, err := in.g.Ctl(30*time.Second, "wg show wg0")
	if err != nil || !strings.Contains(out, "latest handshake:") || !strings.Contains(out, "transfer:") {
		t.Errorf("guest wg show wg0 lacks handshake or transfer: %v\n%s", err, out)
	}
	if in.p.final != nil {
		in.p.final(t)
	}
}
