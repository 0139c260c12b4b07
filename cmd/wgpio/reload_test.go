//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/testing/downdev"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/noise"
)

// TestUpReload: SIGHUP (systemctl reload) applies the edited file to a
// running gateway as `wg syncconf NAME <(wgpio strip FILE)` does, in the
// fast path and in compat mode: a peer added, the stock peer's IPv6
// allowed IP dropped (its traffic stops at once), FwMark set, the
// stock peer's session kept (same handshake time, traffic on); a file
// that does not parse changes nothing and is logged; a peer dropped from
// the file is removed. The process runs on throughout. (SIGHUP used to
// end the process as Go's default does, skipping the shutdown.)
func TestUpReload(t *testing.T) {
	for _, mode := range []config.Mode{config.ModeFastPath, config.ModeCompat} {
		t.Run(string(mode), func(t *testing.T) {
			s := newSite(t, func(f *config.File) { f.WGPIO.Mode = mode })
			g := s.up(t)
			s.pingBoth(t)
			if err := s.HostA.Ping(twosite.HostB6, 5*time.Second); err != nil {
				t.Fatalf("IPv6: %v", err)
			}
			stock := s.FastConfig.Peers[0].PublicKey.Base64()
			handshake := func() string {
				for _, l := range strings.Split(wg(t, s.GwA, "show", s.GwName, "latest-handshakes"), "\n") {
					if k, v, ok := strings.Cut(l, "\t"); ok && k == stock {
						return v
					}
				}
				return ""
			}
			before := handshake()

			k, err := noise.NewPrivateKey()
			if err != nil {
				t.Fatal(err)
			}
			added := k.PublicKey().Base64()
			write := func(text string) {
				t.Helper()
				if err := os.WriteFile(s.conf, []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			edited := *s.file
			edited.Interface.FwMark = 0x99
			edited.Interface.Unused = []config.Setting{{Key: "FwMark", Value: "0x99"}}
			kept := s.file.Peers[0] // the stock peer, IPv4 allowed IPs only
			kept.AllowedIPs = nil
			for _, a := range s.file.Peers[0].AllowedIPs {
				if a.Addr().Is4() {
					kept.AllowedIPs = append(kept.AllowedIPs, a)
				}
			}
			edited.Peers = []config.Peer{kept, {PublicKey: k.PublicKey()}}
			write(string(edited.Marshal()))
			hup := func() {
				t.Helper()
				if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
					t.Fatal(err)
				}
			}
			hup()
			waitFor(t, 5*time.Second, "the added peer", func() bool {
				return strings.Contains(wg(t, s.GwA, "show", s.GwName, "peers"), added)
			})
			if g.exited() {
				t.Fatalf("wgpio exited on SIGHUP: %v", g.err)
			}
			if got := strings.TrimSpace(wg(t, s.GwA, "show", s.GwName, "fwmark")); got != "0x99" {
				t.Errorf("fwmark after reload = %q, want 0x99", got)
			}
			if got := wg(t, s.GwA, "show", s.GwName, "allowed-ips"); strings.Contains(got, "2001:db8:2::/64") {
				t.Errorf("allowed IPs after reload still hold 2001:db8:2::/64:\n%s", got)
			}
			if _, err := s.HostA.Run("ping", "-c", "1", "-W", "1", twosite.HostB6.String()); err == nil {
				t.Errorf("ping %v answered after the reload removed its allowed IP", twosite.HostB6)
			}
			if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
				t.Errorf("IPv4 after reload: %v", err)
			}
			if after := handshake(); after != before {
				t.Errorf("latest handshake of the stock peer %s before the reload, %s after: want its session kept", before, after)
			}

			write("[Interface]\nPrivateKey = nonsense\n")
			hup()
			waitFor(t, 5*time.Second, "the reload error in the log", func() bool {
				return strings.Contains(g.output(), "reload: configuration not applied")
			})
			if !strings.Contains(wg(t, s.GwA, "show", s.GwName, "peers"), added) || g.exited() {
				t.Errorf("a file that does not parse changed the gateway (exited %v)", g.exited())
			}

			edited.Peers = edited.Peers[:1]
			write(string(edited.Marshal()))
			hup()
			waitFor(t, 5*time.Second, "the removed peer gone", func() bool {
				return !strings.Contains(wg(t, s.GwA, "show", s.GwName, "peers"), added)
			})

			if mode == config.ModeFastPath {
				// A key only a start applies, with a value the next
				// start refuses (the veths have one RX queue): the
				// reload says so, rather than a reboot weeks later.
				edited.WGPIO.Queues = 4
				write(string(edited.Marshal()))
				hup()
				waitFor(t, 5*time.Second, "the warning of the next start", func() bool {
					return strings.Contains(g.output(), "the next start with this file would fail")
				})
				if out := g.output(); !strings.Contains(out, `key \"Queues\": 4 queues`) {
					t.Errorf("the warning does not name Queues:\n%s", out)
				}
			}

			g.cmd.Process.Signal(syscall.SIGTERM)
			<-g.done
			if g.err != nil {
				t.Errorf("exit after SIGTERM: %v", g.err)
			}
		})
	}
}

// waitFor polls cond every 20 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("waited %v for %s", d, what)
		}
	}
}

// TestUpReloadStorm: a storm of SIGHUPs while pings cross the tunnel,
// the file flipping between two versions (a second peer and another
// ListenPort in one) and a `wg set` running meanwhile, in the fast path
// and in compat mode: the gateway runs on, the stock peer's traffic
// passes after the storm, the last version read is applied, and SIGTERM
// stops it cleanly.
func TestUpReloadStorm(t *testing.T) {
	for _, mode := range []config.Mode{config.ModeFastPath, config.ModeCompat} {
		t.Run(string(mode), func(t *testing.T) {
			s := newSite(t, func(f *config.File) { f.WGPIO.Mode = mode })
			g := s.up(t)
			s.pingBoth(t)
			k, err := noise.NewPrivateKey()
			if err != nil {
				t.Fatal(err)
			}
			added := k.PublicKey().Base64()
			a := *s.file
			b := *s.file
			b.Peers = append(append([]config.Peer(nil), s.file.Peers...), config.Peer{PublicKey: k.PublicKey()})
			b.Interface.ListenPort = s.file.Interface.ListenPort + 7
			versions := [][]byte{a.Marshal(), b.Marshal()}
			stop := make(chan struct{})
			pinged := make(chan error, 1)
			go func() {
				var last error
				for {
					select {
					case <-stop:
						pinged <- last
						return
					default:
					}
					_, last = s.HostA.Run("ping", "-c", "1", "-W", "1", twosite.HostB4.String())
				}
			}()
			for i := range 100 {
				if err := os.WriteFile(s.conf, versions[i%2], 0o600); err != nil {
					t.Fatal(err)
				}
				if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
					t.Fatal(err)
				}
				if i%10 == 0 {
					wg(t, s.GwA, "set", s.GwName, "peer", added, "persistent-keepalive", "0")
				}
				time.Sleep(2 * time.Millisecond)
			}
			// The last version written has the second peer.
			waitFor(t, 5*time.Second, "the second peer", func() bool {
				return strings.Contains(wg(t, s.GwA, "show", s.GwName, "peers"), added)
			})
			close(stop)
			<-pinged
			if g.exited() {
				t.Fatalf("wgpio exited during the SIGHUP storm: %v\n%s", g.err, g.output())
			}
			if err := s.HostA.Ping(twosite.HostB4, 10*time.Second); err != nil {
				t.Errorf("IPv4 after the storm: %v", err)
			}
			g.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-g.done:
			case <-time.After(20 * time.Second):
				t.Fatalf("wgpio did not stop within 20 s of SIGTERM after the storm\n%s", g.output())
			}
			if g.err != nil {
				t.Errorf("exit after SIGTERM: %v", g.err)
			}
		})
	}
}

// TestReloadReports: a reload says what it applied, the peers the file
// added, removed and kept, and names the keys that changed in the file but
// take effect only at the next start (Address, MTU, [WGPIO] keys), so that
// an edit of those is not taken for applied. Before, every reload logged
// the same sentence whatever the file said.
func TestReloadReports(t *testing.T) {
	keys := make([]noise.PublicKey, 3) // kept, removed, added
	for i := range keys {
		k, err := noise.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k.PublicKey()
	}
	priv, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	text := func(addr string, mtu, queues int, peers ...noise.PublicKey) string {
		s := fmt.Sprintf("[Interface]\nPrivateKey = %s\nListenPort = 51820\nAddress = %s\nMTU = %d\n[WGPIO]\nWAN = eth0\nLAN = eth1\nQueues = %d\n",
			priv.Base64(), addr, mtu, queues)
		for _, p := range peers {
			s += "[Peer]\nPublicKey = " + p.Base64() + "\nAllowedIPs = 198.18.99.0/24\n"
		}
		return s
	}
	path := filepath.Join(t.TempDir(), "wg0.conf")
	started, err := config.Parse(path, strings.NewReader(text("198.18.98.1/24", 1420, 2, keys[0], keys[1])))
	if err != nil {
		t.Fatal(err)
	}
	var set string
	dev := uapiDevice{
		get: func() (string, error) {
			return "private_key=" + priv.Hex() + "\nlisten_port=51820\npublic_key=" + keys[0].Hex() + "\npublic_key=" + keys[1].Hex() + "\n", nil
		},
		set: func(body string) error { set = body; return nil },
	}
	for _, tc := range []struct {
		name    string
		file    string
		want    reloaded
		removes bool
	}{
		{"unchanged", text("198.18.98.1/24", 1420, 2, keys[0], keys[1]), reloaded{kept: 2}, false},
		{"peers", text("198.18.98.1/24", 1420, 2, keys[0], keys[2]), reloaded{added: 1, removed: 1, kept: 1}, true},
		{"start only", text("198.18.97.1/24", 1400, 1, keys[0], keys[1]), reloaded{kept: 2, restart: []string{"Address", "MTU", "Queues"}}, false},
		// Unset keys written with their default values: nothing
		// changes (before, each was named as needing a restart).
		{"defaults written", withKeys(text("198.18.98.1/24", 1420, 2, keys[0], keys[1]),
			"Mode = fastpath\nAddressMode = shared\nXDPMode = auto\nMetricsPeers = 1000\nMSSClamp = off\n"+
				"ICMPRate = 1000\nICMPBurst = 50\nICMPDestInterval = 1000\nReplayWindow = auto\n"), reloaded{kept: 2}, false},
		{"other values", withKeys(text("198.18.98.1/24", 1420, 2, keys[0], keys[1]), "MSSClamp = auto\nReplayWindow = 8128\n"),
			reloaded{kept: 2, restart: []string{"MSSClamp", "ReplayWindow"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			set = ""
			got, err := reload(started, dev)
			if err != nil {
				t.Fatalf("reload: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(reloaded{})); diff != "" {
				t.Errorf("reload (-want +got):\n%s", diff)
			}
			if removed := strings.Contains(set, "public_key="+keys[1].Hex()+"\nremove=true\n"); removed != tc.removes {
				t.Errorf("UAPI body removes %s: %v, want %v:\n%s", keys[1].Base64(), removed, tc.removes, set)
			}
			// The running port (51820) is not set again: stock
			// wireguard-go rebinds its sockets on every listen_port
			// line, losing what arrives meanwhile.
			if strings.Contains(set, "listen_port=") {
				t.Errorf("UAPI body sets the running listen port again:\n%s", set)
			}
		})
	}
}

// withKeys is the configuration text s with lines (each ending in a
// newline) added to its [WGPIO] section.
func withKeys(s, lines string) string {
	return strings.Replace(s, "[WGPIO]\n", "[WGPIO]\n"+lines, 1)
}

// TestReloadClearsDroppedKeys: a reload whose file keeps a peer but no
// longer sets its PresharedKey and PersistentKeepalive removes both from
// the device, and keeps the peer's endpoint, which the file no longer
// gives either, as `wg syncconf` does (wireguard-tools 780182e: it sends
// a zero key and a zero interval; no endpoint). The device is stock
// wireguard-go, the UAPI of both compat modes; the fast path's UAPI
// takes the same text alike (gateway's TestUAPISetMatchesWireguardGo,
// "syncconf drops preshared key and keepalive"). Before, the preshared
// key and the keepalive stayed.
func TestReloadClearsDroppedKeys(t *testing.T) {
	priv, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	peerPriv, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := peerPriv.PublicKey()
	psk, err := noise.NewPresharedKey()
	if err != nil {
		t.Fatal(err)
	}
	head := "[Interface]\nPrivateKey = " + priv.Base64() + "\nListenPort = 51820\n[Peer]\nPublicKey = " + pub.Base64() + "\nAllowedIPs = 198.18.99.0/24\n"
	path := filepath.Join(t.TempDir(), "wg0.conf")
	started, err := config.Parse(path, strings.NewReader(head+"PresharedKey = "+psk.Base64()+"\nEndpoint = 198.18.0.2:51820\nPersistentKeepalive = 25\n"))
	if err != nil {
		t.Fatal(err)
	}
	dev := downdev.New()
	defer dev.Close()
	if err := dev.IpcSet(started.UAPI()); err != nil {
		t.Fatalf("set the started file: %v", err)
	}
	if err := os.WriteFile(path, []byte(head), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := reload(started, uapiDevice{get: dev.IpcGet, set: dev.IpcSet})
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	if r.kept != 1 {
		t.Errorf("reload kept %d peers, want 1", r.kept)
	}
	got, err := dev.IpcGet()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"preshared_key=" + strings.Repeat("0", 64) + "\n",
		"persistent_keepalive_interval=0\n",
		"endpoint=198.18.0.2:51820\n",
		"allowed_ip=198.18.99.0/24\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("after the reload, get=1 lacks %q:\n%s", want, got)
		}
	}
}

// TestReloadRefusedPort: a reload whose ListenPort the device refuses (a
// port another socket holds) applies nothing of the file, and a device
// left without a port (wireguard-go closes its sockets before it opens
// the new port) gets its old one back; the error says the device refused
// a line. Before, the private key went first: a new key in the same edit
// was applied and the peers not, every session's peer still expecting the
// old key (tunnel down), and compat mode listened on no port at all, both
// logged as "configuration not applied; the gateway runs on as it was".
func TestReloadRefusedPort(t *testing.T) {
	oldKey, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	peer, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	file := func(k noise.PrivateKey, port int) string {
		return fmt.Sprintf("[Interface]\nPrivateKey = %s\nListenPort = %d\n[Peer]\nPublicKey = %s\nAllowedIPs = 198.18.99.0/24\n",
			k.Base64(), port, peer.PublicKey().Base64())
	}
	path := filepath.Join(t.TempDir(), "wg0.conf")
	started, err := config.Parse(path, strings.NewReader(file(oldKey, 51820)))
	if err != nil {
		t.Fatal(err)
	}
	// A device as wireguard-go's: each line applied in order, the set
	// ending at the first refused; a refused port leaves none.
	const busy = 51900
	state := map[string]string{"private_key": oldKey.Hex(), "listen_port": "51820"}
	dev := uapiDevice{
		get: func() (string, error) {
			return "private_key=" + state["private_key"] + "\nlisten_port=" + state["listen_port"] + "\n", nil
		},
		set: func(body string) error {
			for line := range strings.Lines(body) {
				k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
				if k == "listen_port" && v == strconv.Itoa(busy) {
					state["listen_port"] = "0"
					// As gateway.Device and wireguard-go wrap it.
					return fmt.Errorf("set listen_port %d: %w", busy, syscall.EADDRINUSE)
				}
				if k == "private_key" || k == "listen_port" {
					state[k] = v
				}
			}
			return nil
		},
	}
	if err := os.WriteFile(path, []byte(file(newKey, busy)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = reload(started, dev)
	var refused *refusedError
	if !errors.As(err, &refused) {
		t.Fatalf("reload with a refused port: %v, want a refusedError", err)
	}
	if state["private_key"] != oldKey.Hex() {
		t.Errorf("the private key changed with the port refused: the peers still expect the old one")
	}
	if state["listen_port"] != "51820" || refused.port != 51820 {
		t.Errorf("after the refused port the device listens on %s (error says %d), want its old 51820", state["listen_port"], refused.port)
	}
	// The refusal names the file's line and key, as the reload's other
	// errors do; it named the UAPI's listen_port only.
	if want := path + `:3: key "ListenPort": port 51900 is in use on this host`; !strings.Contains(refused.err.Error(), want) {
		t.Errorf("refusal %q, want it to contain %q", refused.err, want)
	}
}
