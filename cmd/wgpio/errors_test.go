//go:build linux

package main

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
	"golang.org/x/sys/unix"
)

// TestUpErrors gives `wgpio up` configurations a new user gets wrong and
// checks each exact message: config errors with file:line and key (a
// tunnel MTU the WAN cannot carry in both modes included), an
// interface that does not exist, missing privileges (fast path and
// compat-mqtun), a second instance (same name, same WAN, the first's LAN as
// its WAN), an address in use (metrics; the listen port), and `wgpio stats` by a user who may not.
func TestUpErrors(t *testing.T) {
	testenv.Tool(t, "setpriv", "util-linux")
	s := newSite(t, nil)
	key := s.file.Interface.PrivateKey.Base64()
	good := string(s.file.Marshal())
	// A TCP port taken inside gwA's namespace.
	var busy net.Listener
	if err := s.GwA.Do(func() (err error) {
		busy, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	// A UDP port taken on the wildcard address (a wg0 or wireguard-go
	// still up on the gateway's port would hold it so).
	var busyUDP *net.UDPConn
	if err := s.GwA.Do(func() (err error) {
		busyUDP, err = net.ListenUDP("udp4", &net.UDPAddr{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer busyUDP.Close()
	udpPort := busyUDP.LocalAddr().(*net.UDPAddr).Port
	metricsName := topo.UniqueName("wgpm")
	// An interface without native XDP: a bridge.
	bridge := topo.UniqueName("wgd")
	for _, args := range [][]string{
		{"link", "add", bridge, "type", "bridge"},
		{"addr", "add", "198.18.7.1/24", "dev", bridge},
		{"link", "set", bridge, "up"},
	} {
		if _, err := s.GwA.Run("ip", args...); err != nil {
			t.Fatal(err)
		}
	}

	withWGPIO := func(extra string) string {
		return strings.Replace(good, "[WGPIO]\n", "[WGPIO]\n"+extra+"\n", 1)
	}
	running, firstPid := false, 0
	nobody := []string{"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--inh-caps=-all"}
	for _, tc := range []struct {
		name  string
		first bool     // needs the first instance running on the site's interfaces
		conf  string   // file contents, written as <name>.conf
		args  []string // extra arguments to `wgpio up`
		wrap  []string // command in front of wgpio (run as another user)
		want  string   // the whole of stderr
	}{
		{
			name: "metrics-in-use",
			conf: withWGPIO("MetricsAddress = " + busy.Addr().String()),
			args: []string{"-name", metricsName},
			want: fmt.Sprintf(`wgpio: metrics-in-use.conf:7: key "MetricsAddress": cannot serve metrics on %s: listen tcp %s: bind: address already in use `+
				"(another process holds the port, or the address is not this host's: choose another host:port)", busy.Addr(), busy.Addr()),
		},
		{
			// Refused, as Linux's wg0 refuses to come up, where the
			// gateway came up and its XDP program took the holder's
			// datagrams unseen.
			name: "udp-port-in-use",
			conf: strings.Replace(good, "ListenPort = 51820", fmt.Sprintf("ListenPort = %d", udpPort), 1),
			args: []string{"-name", topo.UniqueName("wgpu")},
			want: fmt.Sprintf(`wgpio: udp-port-in-use.conf:3: key "ListenPort": listen udp4 198.18.1.1:%d: bind: address already in use; `+
				"another socket of this host holds UDP port %d (`ss -uanp 'sport = :%d'` names its process: a wg0 or wireguard-go still up on it?), "+
				"and it would receive none of its datagrams once the gateway's XDP program takes them: stop it, or choose another port", udpPort, udpPort, udpPort),
		},
		{
			// Compat mode refuses it too, before its XDP program is
			// attached (as fast-path mode).
			name: "udp-port-in-use-compat",
			conf: strings.Replace(withWGPIO("Mode = compat"), "ListenPort = 51820", fmt.Sprintf("ListenPort = %d", udpPort), 1),
			args: []string{"-name", topo.UniqueName("wgpu")},
			want: fmt.Sprintf(`wgpio: udp-port-in-use-compat.conf:3: key "ListenPort": listen udp4 198.18.1.1:%d: bind: address already in use; `+
				"another socket of this host holds UDP port %d (`ss -uanp 'sport = :%d'` names its process: a wg0 or wireguard-go still up on it?), "+
				"and it would receive none of its datagrams once the gateway's XDP program takes them: stop it, or choose another port", udpPort, udpPort, udpPort),
		},
		{
			name: "bad-port",
			conf: "[Interface]\nPrivateKey = " + key + "\nListenPort = 70000\n",
			want: `wgpio: bad-port.conf:3: key "ListenPort": port 70000 out of range 1-65535`,
		},
		{
			name: "bad-allowed-ips",
			conf: "[Interface]\nPrivateKey = " + key + "\n\n[Peer]\nPublicKey = " + s.FastConfig.Peers[0].PublicKey.Base64() + "\nAllowedIPs = 198.19.2.0/33\n",
			want: `wgpio: bad-allowed-ips.conf:6: key "AllowedIPs": "198.19.2.0/33" is not an IP address or CIDR`,
		},
		{
			name: "no-private-key",
			conf: "[Interface]\nListenPort = 51820\n",
			want: `wgpio: no-private-key.conf:1: [Interface] has no PrivateKey`,
		},
		{
			name: "unknown-key",
			conf: "[Interface]\nPrivateKey = " + key + "\nListenPrt = 51820\n",
			want: `wgpio: unknown-key.conf:3: key "ListenPrt": unknown key in [Interface]; did you mean "ListenPort"?`,
		},
		{
			name: "no-wan",
			conf: "[Interface]\nPrivateKey = " + key + "\n",
			want: `wgpio: no-wan.conf: fast-path mode needs WAN and LAN in the [WGPIO] section (or the -wan and -lan flags of up and check)`,
		},
		{
			name: "no-such-interface",
			conf: good,
			args: []string{"-wan", "nosuch0", "-name", "wgpnosuch"},
			want: `wgpio: up: -wan: no interface "nosuch0" in this network namespace (list them with ` + "`ip link`)",
		},
		{
			name: "xdp-unsupported",
			conf: withWGPIO("XDPMode = native"),
			args: []string{"-wan", bridge, "-name", topo.UniqueName("wgpx")},
			want: fmt.Sprintf("wgpio: fastgw: WAN: %s: afxdp: XDP mode not supported by the driver: dataplane: not supported: attach native XDP on %s: "+
				"afxdp: native XDP with redirect in driver \"bridge\" not supported by Linux %s: use generic XDP (AttachGeneric, XDPMode = generic), or a NIC whose driver has native XDP: the driver declares xdp-features 0x0, without basic actions and redirect (0x3)\n"+
				"(try XDPMode = generic in [WGPIO], or Mode = compat-mqtun, which needs no XDP)", bridge, bridge, kernelRelease(t)),
		},
		{
			name: "source-ports",
			conf: withWGPIO("SourcePorts = 51900-51910"),
			want: `wgpio: source-ports.conf:7: key "SourcePorts": must start at the ListenPort 51820 (the peers send to it; replies leave from the range above it)`,
		},
		{
			// Over the WAN MTU is a warning (the outer packets leave as
			// fragments); over what an AF_XDP frame holds, an error at
			// the key.
			name: "mtu",
			conf: strings.Replace(good, "\n\n[WGPIO]\n", "\nMTU = 3800\n\n[WGPIO]\n", 1),
			want: `wgpio: mtu.conf:5: key "MTU": tunnel MTU 3800 makes WAN frames of 3874 bytes (60 of outer IPv4, UDP and WireGuard headers, the Ethernet header), more than the 3836 an AF_XDP frame holds: ` +
				`full-size tunnel packets to IPv4 peers could never be sent; lower MTU in [Interface] to 3762`,
		},
		{
			// Compat mode checks the tunnel MTU as fast-path mode does.
			name: "mtu-compat",
			conf: strings.Replace(withWGPIO("Mode = compat"), "\n\n[WGPIO]\n", "\nMTU = 9000\n\n[WGPIO]\n", 1),
			want: `wgpio: mtu-compat.conf:5: key "MTU": tunnel MTU 9000 makes WAN frames of 9074 bytes (60 of outer IPv4, UDP and WireGuard headers, the Ethernet header), more than the 3836 an AF_XDP frame holds: ` +
				`full-size tunnel packets to IPv4 peers could never be sent; lower MTU in [Interface] to 3762`,
		},
		{
			name: "wan-is-lan",
			conf: strings.Replace(good, "LAN = "+s.LANA+"\n", "LAN = "+s.WANA+"\n", 1),
			want: fmt.Sprintf(`wgpio: wan-is-lan.conf:8: key "LAN": %q is the WAN interface too; WAN (toward the peers) and LAN (toward the hosts behind the gateway) must be two interfaces`, s.WANA),
		},
		{
			// An interface that is not Ethernet, in either mode: at the
			// key that named it.
			name: "lan-lo",
			conf: strings.Replace(good, "LAN = "+s.LANA+"\n", "LAN = lo\n", 1),
			want: `wgpio: lan-lo.conf:8: key "LAN": LAN: afxdp: not an Ethernet interface: lo is of link type "loopback" (ip -d link show lo): name the NIC or veth that carries the traffic`,
		},
		{
			name: "lan-lo-compat",
			conf: strings.Replace(withWGPIO("Mode = compat"), "LAN = "+s.LANA+"\n", "LAN = lo\n", 1),
			want: `wgpio: lan-lo-compat.conf:9: key "LAN": LAN: afxdp: not an Ethernet interface: lo is of link type "loopback" (ip -d link show lo): name the NIC or veth that carries the traffic`,
		},
		{
			name: "wan-is-lan-flag",
			conf: good,
			args: []string{"-lan", s.WANA},
			want: fmt.Sprintf(`wgpio: up: -lan: %q is the WAN interface too; WAN (toward the peers) and LAN (toward the hosts behind the gateway) must be two interfaces`, s.WANA),
		},
		{
			name: "queues",
			conf: withWGPIO("Queues = 4"),
			want: fmt.Sprintf(`wgpio: queues.conf:7: key "Queues": 4 queues, but %s has 1 RX queue (ask for fewer, or add queues with ethtool -L %s combined N; on veth: ethtool -L %s rx N tx N)`, s.WANA, s.WANA, s.WANA),
		},
		{
			name: "vlan-compat",
			conf: withWGPIO("Mode = compat\nLANVLAN = 100"),
			want: `wgpio: vlan-compat.conf:8: key "LANVLAN": a VLAN of a trunk is served in Mode = fastpath only, not in Mode = compat`,
		},
		{
			name: "vlan-shared-without-device",
			conf: withWGPIO("LANVLAN = 100"),
			args: []string{"-name", topo.UniqueName("wgpv")},
			want: fmt.Sprintf("wgpio: vlan-shared-without-device.conf:7: key \"LANVLAN\": LANVLAN 100 on %s in shared address mode needs the kernel's VLAN device for it, which holds the address and answers ARP/NDP: "+
				"ip link add link %s name %s.100 type vlan id 100 (module 8021q), or use AddressMode = owned", s.LANA, s.LANA, s.LANA),
		},
		{
			name: "no-privileges",
			conf: good,
			wrap: nobody,
			want: "wgpio: missing privileges: CAP_NET_ADMIN (to attach XDP programs, create the exception TUN), CAP_NET_RAW (to open AF_XDP sockets), CAP_BPF (to load the XDP program and its maps); run as root, or grant CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF (systemd: AmbientCapabilities=, see dist/wgpio.service; by hand: setpriv --inh-caps=+net_admin,+net_raw,+bpf --ambient-caps=+net_admin,+net_raw,+bpf ...)",
		},
		{
			// A port below 1024 needs CAP_NET_BIND_SERVICE for the
			// kernel's sockets, which the fast path's capabilities
			// alone lack: the gateway came up, and every fragmented
			// datagram to the port was lost.
			name: "low-port",
			conf: strings.Replace(good, "ListenPort = 51820", "ListenPort = 443", 1),
			wrap: []string{"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
				"--inh-caps=-all,+net_admin,+net_raw,+bpf", "--ambient-caps=+net_admin,+net_raw,+bpf"},
			want: `wgpio: low-port.conf:3: key "ListenPort": port 443 is below net.ipv4.ip_unprivileged_port_start (1024): binding it needs CAP_NET_BIND_SERVICE ` +
				"(systemd: in AmbientCapabilities= and CapabilityBoundingSet=, as dist/wgpio.service has it; by hand: +net_bind_service among setpriv's --inh-caps and --ambient-caps), " +
				"or let every user bind it in the gateway's namespace: sysctl -w net.ipv4.ip_unprivileged_port_start=443",
		},
		{
			// compat-mqtun needs CAP_NET_ADMIN alone, and says so before
			// it touches the run directories.
			name: "noprivs-mqtun",
			conf: withWGPIO("Mode = compat-mqtun"),
			wrap: nobody,
			want: "wgpio: missing privileges: CAP_NET_ADMIN (to create the multi-queue TUN, its addresses and routes); run as root, or grant CAP_NET_ADMIN (systemd: AmbientCapabilities=, see dist/wgpio.service; by hand: setpriv --inh-caps=+net_admin --ambient-caps=+net_admin ...)",
		},
		{
			name:  "same-name",
			first: true,
			conf:  good,
			args:  []string{"-name", s.GwName},
			want: fmt.Sprintf("wgpio: another wgpio (gateway %s, pid {pid}) already runs with name %s (lock %s/name-%s.lock held); "+
				"stop that gateway first (kill -TERM {pid}; systemctl stop wgpio@%s if it runs under dist/wgpio.service), "+
				"or start this one under another name with -name (by default the file's name without .conf)", s.GwName, s.GwName, runDir, s.GwName, s.GwName),
		},
		{
			name:  "same-interface",
			first: true,
			conf:  good,
			args:  []string{"-name", "wgpsecond"},
			want: fmt.Sprintf("wgpio: another wgpio (gateway %s, pid {pid}) already runs with interface %s (lock %s/if-%s-%s.lock held); "+
				"stop that gateway first (kill -TERM {pid}; systemctl stop wgpio@%s if it runs under dist/wgpio.service), or name another interface",
				s.GwName, s.WANA, runDir, nsInode(t, s), s.WANA, s.GwName),
		},
		{
			// The first instance's LAN as this one's WAN (and the other
			// way round): refused by name, not by the kernel's "queue
			// busy" after a two-second wait.
			name:  "same-interface-as-lan",
			first: true,
			conf:  good,
			args:  []string{"-name", "wgpsecond", "-wan", s.LANA, "-lan", s.WANA},
			want: fmt.Sprintf("wgpio: another wgpio (gateway %s, pid {pid}) already runs with interface %s (lock %s/if-%s-%s.lock held); "+
				"stop that gateway first (kill -TERM {pid}; systemctl stop wgpio@%s if it runs under dist/wgpio.service), or name another interface",
				s.GwName, s.LANA, runDir, nsInode(t, s), s.LANA, s.GwName),
		},
	} {
		if tc.first && !running {
			firstPid = s.up(t).cmd.Process.Pid
			s.pingBoth(t)
			running = true
		}
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(s.dir, tc.name+".conf")
			if err := os.WriteFile(file, []byte(tc.conf), 0o644); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"up", "-c", tc.name + ".conf"}, tc.args...)
			cmdline := append(append(append([]string(nil), tc.wrap...), wgpioBin), args...)
			cmd := s.GwA.Command(cmdline[0], cmdline[1:]...)
			cmd.Dir = s.dir
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Errorf("wgpio up: %v, want exit status 1", err)
			}
			// The error is what follows the log lines (warnings such as
			// the veth checksum-offload one may come before it).
			var errLines []string
			for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
				if !strings.HasPrefix(l, "time=") {
					errLines = append(errLines, l)
				}
			}
			// {pid}: the first instance's, which holds the locks.
			want := strings.ReplaceAll(tc.want, "{pid}", strconv.Itoa(firstPid))
			if got := strings.Join(errLines, "\n"); got != want {
				t.Errorf("wgpio up stderr:\n got %s\nwant %s", got, want)
			}
		})
	}
	// The first instance is unharmed.
	if err := s.HostA.Ping(twosite.HostB4, 10*time.Second); err != nil {
		st, _ := exec.Command(wgpioBin, "stats", s.GwName).CombinedOutput()
		t.Fatalf("%v\n%s\n%s\n%s", err, st, wg(t, s.GwA, "show"), wg(t, s.GwB, "show"))
	}
	// Its counters are root's: another user is told so, not asked whether
	// the gateway runs.
	out, _ := exec.Command(nobody[0], append(nobody[1:], wgpioBin, "stats", s.GwName)...).CombinedOutput()
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("wgpio: gateway %s: dial unix %s/%s.stats: connect: permission denied (running as uid %s: the socket is the gateway's user's; run this as root or as that user)\n", s.GwName, runDir, s.GwName, u.Uid)
	if string(out) != want {
		t.Errorf("wgpio stats as nobody:\n got %s\nwant %s", out, want)
	}
}

// nsInode returns the inode of gwA's network namespace (the interface lock
// names it).
func nsInode(t *testing.T, s *site) string {
	t.Helper()
	out, err := s.GwA.Run("stat", "-L", "-c", "%i", "/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// TestSignalsLeaveHostClean stops a gateway in the middle of traffic with
// SIGTERM (clean shutdown) and SIGKILL (none): either way no XDP program
// stays attached, the exception TUN is gone and the interfaces pass kernel
// traffic again. After SIGTERM the UAPI, stats and capture sockets are
// removed; after SIGKILL nobody can remove them, and the next `wgpio up`
// replaces the stale ones.
func TestSignalsLeaveHostClean(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			s := newSite(t, nil)
			g := s.up(t)
			s.pingBoth(t)
			flood := s.HostA.Command("ping", "-q", "-i", "0.002", "-w", "3", twosite.HostB4.String())
			if err := flood.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { flood.Process.Kill(); flood.Wait() })
			time.Sleep(500 * time.Millisecond)
			g.cmd.Process.Signal(sig)
			select {
			case <-g.done:
			case <-time.After(10 * time.Second):
				t.Fatalf("wgpio did not exit on %v", sig)
			}
			if sig == syscall.SIGTERM {
				if g.err != nil {
					t.Errorf("exit after SIGTERM: %v, want status 0", g.err)
				}
				if !strings.Contains(g.output(), "final counters") {
					t.Errorf("no final counters logged after SIGTERM:\n%s", g.output())
				}
			}
			s.checkClean(t, sig == syscall.SIGTERM)
			if sig == syscall.SIGKILL {
				// A new instance starts over the stale sockets and stops
				// cleanly.
				g2 := s.up(t)
				s.pingBoth(t)
				g2.cmd.Process.Signal(syscall.SIGTERM)
				<-g2.done
				if g2.err != nil {
					t.Errorf("restarted gateway exit: %v", g2.err)
				}
				s.checkClean(t, true)
			}
		})
	}
}

// checkClean checks that gwA's host is as it was before `wgpio up`.
func (s *site) checkClean(t *testing.T, sockets bool) {
	t.Helper()
	for _, dev := range []string{s.WANA, s.LANA} {
		if xdpAttached(t, s.GwA, dev) {
			out, _ := s.GwA.Run("ip", "link", "show", "dev", dev)
			t.Errorf("XDP still attached to %s:\n%s", dev, out)
		}
	}
	if _, err := s.GwA.Run("ip", "link", "show", "dev", s.GwName); err == nil {
		t.Errorf("the exception TUN %s is still there", s.GwName)
	}
	if sockets {
		for _, p := range []string{"/var/run/wireguard/" + s.GwName + ".sock", filepath.Join(runDir, s.GwName+".stats"), filepath.Join(runDir, s.GwName+".capture")} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%s is still there", p)
			}
		}
	}
	if out, err := s.GwA.Run("wg", "show", s.GwName); err == nil {
		t.Errorf("wg show %s answered after the gateway stopped:\n%s", s.GwName, out)
	}
	// Kernel traffic across both veths.
	if _, err := s.GwA.Run("ping", "-c", "1", "-W", "2", "198.18.1.2"); err != nil {
		t.Errorf("kernel ping across the WAN veth: %v", err)
	}
	if _, err := s.HostA.Run("ping", "-c", "1", "-W", "2", twosite.LANA4.String()); err != nil {
		t.Errorf("kernel ping across the LAN veth: %v", err)
	}
}

// kernelRelease is uname -r, which the errors about kernel features name.
func kernelRelease(t *testing.T) string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	return unix.ByteSliceToString(u.Release[:])
}

// TestStopCountsHeld: packets held for a handshake that has not finished
// when the gateway stops are in the final counters (as peer_removed or
// closed: Close counts them; the counters were read before it, and the
// stop's loss went unsaid).
func TestStopCountsHeld(t *testing.T) {
	s := newSite(t, func(f *config.File) {
		// Nobody answers at this port: the handshake never completes
		// and the host's packets wait for it.
		f.Peers[0].Endpoint = netip.AddrPortFrom(f.Peers[0].Endpoint.Addr(), f.Peers[0].Endpoint.Port()+79)
	})
	g := s.up(t)
	s.HostA.Ping(twosite.HostB4, 2*time.Second) // held, then unanswered
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		t.Fatal("wgpio did not exit on SIGTERM")
	}
	// The device's Close removes the peer first, whose held packets the
	// workers then drop as peer_removed; those the workers had no time
	// for are dropped by the engine's Close as closed. Either way they
	// are in the last lines.
	if out := g.output(); !strings.Contains(out, "final counters") ||
		!strings.Contains(out, "drop_closed=") && !strings.Contains(out, "drop_peer_removed=") {
		t.Errorf("the held packets not in the final counters (drop_closed or drop_peer_removed):\n%s", out)
	}
}
