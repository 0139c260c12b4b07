package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/downdev"
	"github.com/wgpio/wgpio/noise"
)

// uniqueName returns an interface name no other test uses (the UAPI
// directory is shared by every namespace): prefix + 6 random hex digits.
func uniqueName(prefix string) string {
	var b [3]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// refDevice is a stock wireguard-go device (down: no sockets) with its own
// UAPI listener, the reference for our UAPI.
func refDevice(t *testing.T, name string) *device.Device {
	t.Helper()
	// The TUN never reports "up", so the device stays down: no socket is
	// opened and nothing is sent anywhere.
	dev := downdev.New()
	t.Cleanup(dev.Close)
	if name == "" {
		return dev
	}
	f, err := ipc.UAPIOpen(name)
	if err != nil {
		testenv.Missing(t, "UAPI socket directory /var/run/wireguard", fmt.Sprintf("run as root (%v)", err))
	}
	l, err := ipc.UAPIListen(name, f)
	f.Close()
	if err != nil {
		t.Fatalf("UAPIListen(%s): %v", name, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go dev.IpcHandle(c)
		}
	}()
	return dev
}

// ourDevice is our Device over a fakeDP, serving UAPI as name ("" none).
func ourDevice(t *testing.T, name string) *Device {
	t.Helper()
	d, err := New(Options{Name: name, Dataplane: newFakeDP(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if name == "" {
		return d // IpcGet/IpcSet need no loop
	}
	if err := d.Start(); err != nil {
		if name != "" {
			testenv.Missing(t, "UAPI socket directory /var/run/wireguard", fmt.Sprintf("run as root (%v)", err))
		}
		t.Fatal(err)
	}
	return d
}

// normalize (times and counters aside) makes UAPI get output or wg(8) output comparable between two
// devices: the interface name replaced, peer blocks sorted (wireguard-go
// keeps peers in a map), comma lists and allowed_ip lines sorted.
func normalize(s, name string) string {
	if name != "" {
		s = strings.ReplaceAll(s, name, "NAME")
	}
	if !strings.Contains(s, "public_key=") && !strings.Contains(s, "peer: ") && !strings.Contains(s, "[Peer]") {
		// One line per peer (wg show <if> <field>): peer order is not part
		// of the contract.
		lines := strings.Split(strings.TrimSpace(s), "\n")
		slices.Sort(lines)
		return strings.Join(lines, "\n")
	}
	// Split into blocks at peer starts.
	var blocks [][]string
	cur := []string{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if strings.HasPrefix(line, "public_key=") || strings.HasPrefix(line, "peer: ") || line == "[Peer]" {
			blocks = append(blocks, cur)
			cur = []string{}
		}
		if line == "" {
			continue
		}
		// Times and counters aside: they depend on traffic, not on the
		// configuration (our device runs; the reference is down).
		if k, _, ok := strings.Cut(line, "="); ok && (k == "tx_bytes" || k == "rx_bytes" || strings.HasPrefix(k, "last_handshake_time")) {
			line = k + "=N"
		}
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "transfer: ") || strings.HasPrefix(t, "latest handshake: ") {
			continue
		}
		if k, v, ok := strings.Cut(line, ": "); ok && strings.Contains(k, "allowed ips") {
			parts := strings.Split(v, ", ")
			slices.Sort(parts)
			line = k + ": " + strings.Join(parts, ", ")
		}
		if k, v, ok := strings.Cut(line, " = "); ok && k == "AllowedIPs" {
			parts := strings.Split(v, ", ")
			slices.Sort(parts)
			line = k + " = " + strings.Join(parts, ", ")
		}
		cur = append(cur, line)
	}
	blocks = append(blocks, cur)
	head := blocks[0]
	peers := blocks[1:]
	for _, b := range peers {
		// allowed_ip lines: order is not part of the contract.
		i := slices.IndexFunc(b, func(l string) bool { return strings.HasPrefix(l, "allowed_ip=") })
		if i >= 0 {
			slices.Sort(b[i:])
		}
	}
	slices.SortFunc(peers, func(a, b []string) int { return strings.Compare(strings.Join(a, "\n"), strings.Join(b, "\n")) })
	var out []string
	out = append(out, head...)
	for _, b := range peers {
		out = append(out, "")
		out = append(out, b...)
	}
	return strings.Join(out, "\n")
}

func hexKey(t *testing.T) (noise.PrivateKey, string) {
	k, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k, k.Hex()
}

func pubHex(t *testing.T) string {
	k, _ := hexKey(t)
	p := k.PublicKey()
	return p.Hex()
}

// TestUAPISetMatchesWireguardGo applies the same "set=1" requests to our
// Device and to stock wireguard-go and compares the errno of each request
// and the "get=1" output after each (known answer: wireguard-go).
func TestUAPISetMatchesWireguardGo(t *testing.T) {
	priv, privHex := hexKey(t)
	self := priv.PublicKey()
	k1, k2 := pubHex(t), pubHex(t)
	psk, _ := noise.NewPresharedKey()
	zero := strings.Repeat("0", 64)
	for _, tc := range []struct {
		name string
		reqs []string
	}{
		{"device keys", []string{"private_key=" + privHex + "\nlisten_port=51820\nfwmark=7\n"}},
		{"zero private key", []string{"private_key=" + privHex + "\n", "private_key=" + zero + "\n"}},
		{"short private key", []string{"private_key=abcd\n"}},
		{"empty private key", []string{"private_key=\n"}},
		{"listen port too large", []string{"listen_port=70000\n"}},
		{"fwmark not decimal", []string{"fwmark=0x10\n"}},
		{"unknown device key", []string{"bogus=1\n"}},
		{"no equals sign", []string{"private_key=" + privHex + "\nnoequals\n"}},
		{"replace_peers false", []string{"replace_peers=false\n"}},
		{"full peer", []string{"private_key=" + privHex + "\npublic_key=" + k1 + "\npreshared_key=" + psk.Hex() +
			"\nendpoint=198.18.0.2:51820\npersistent_keepalive_interval=25\nallowed_ip=198.19.0.0/24\nallowed_ip=2001:2::/64\nprotocol_version=1\n"}},
		{"ipv6 endpoint", []string{"public_key=" + k1 + "\nendpoint=[2001:2::2]:51820\n"}},
		{"bad public key", []string{"public_key=zz\n"}},
		{"host name endpoint", []string{"public_key=" + k1 + "\nendpoint=example.com:51820\n"}},
		{"bad preshared key", []string{"public_key=" + k1 + "\npreshared_key=12\n"}},
		{"keepalive too large", []string{"public_key=" + k1 + "\npersistent_keepalive_interval=70000\n"}},
		{"protocol version 2", []string{"public_key=" + k1 + "\nprotocol_version=2\n"}},
		{"unknown peer key", []string{"public_key=" + k1 + "\nbogus=1\n"}},
		{"bad allowed ip", []string{"public_key=" + k1 + "\nallowed_ip=198.19.0.0/33\n"}},
		// UAPI takes one prefix a line: no list, no empty one.
		{"empty allowed ip", []string{"public_key=" + k1 + "\nallowed_ip=198.19.0.0/24\nallowed_ip=\n"}},
		{"allowed ip list", []string{"public_key=" + k1 + "\nallowed_ip=198.19.0.0/24,,198.19.1.0/24\n"}},
		{"allowed ip masked and deduplicated", []string{"public_key=" + k1 + "\nallowed_ip=198.19.0.1/24\nallowed_ip=198.19.0.0/24\n"}},
		{"allowed ip re-added moves to the end", []string{"public_key=" + k1 + "\nallowed_ip=198.19.0.0/24\nallowed_ip=198.19.1.0/24\n",
			"public_key=" + k1 + "\nallowed_ip=198.19.0.0/24\n"}},
		{"allowed ip moves to later peer", []string{"public_key=" + k1 + "\nallowed_ip=198.19.0.0/24\npublic_key=" + k2 + "\nallowed_ip=198.19.0.0/24\n"}},
		{"allowed ip removed with minus", []string{"public_key=" + k1 + "\nallowed_ip=198.19.0.0/24\nallowed_ip=198.19.1.0/24\n",
			"public_key=" + k1 + "\nallowed_ip=-198.19.0.0/24\nallowed_ip=-198.19.9.0/24\n"}},
		{"minus of other peer's ip", []string{"public_key=" + k1 + "\nallowed_ip=198.19.0.0/24\npublic_key=" + k2 + "\nallowed_ip=-198.19.0.0/24\n"}},
		{"replace allowed ips", []string{"public_key=" + k1 + "\nallowed_ip=198.19.0.0/24\n", "public_key=" + k1 + "\nreplace_allowed_ips=true\nallowed_ip=198.19.5.0/24\n"}},
		// What `wg syncconf` (wireguard-tools 780182e) sends for a peer
		// kept without PresharedKey, PersistentKeepalive and Endpoint.
		{"syncconf drops preshared key and keepalive", []string{"public_key=" + k1 + "\npreshared_key=" + psk.Hex() +
			"\nendpoint=198.18.0.2:51820\npersistent_keepalive_interval=25\nallowed_ip=198.19.0.0/24\n",
			"public_key=" + k1 + "\npreshared_key=" + zero + "\npersistent_keepalive_interval=0\nreplace_allowed_ips=true\nallowed_ip=198.19.1.0/24\n"}},
		{"replace allowed ips bad value", []string{"public_key=" + k1 + "\nreplace_allowed_ips=yes\n"}},
		{"update_only new peer", []string{"public_key=" + k1 + "\nupdate_only=true\nallowed_ip=198.19.0.0/24\n"}},
		{"update_only existing peer", []string{"public_key=" + k1 + "\n", "public_key=" + k1 + "\nupdate_only=true\nallowed_ip=198.19.0.0/24\n"}},
		{"remove", []string{"public_key=" + k1 + "\npublic_key=" + k2 + "\n", "public_key=" + k1 + "\nremove=true\nallowed_ip=198.19.0.0/24\n"}},
		{"remove bad value", []string{"public_key=" + k1 + "\nremove=1\n"}},
		{"replace_peers", []string{"public_key=" + k1 + "\npublic_key=" + k2 + "\n", "replace_peers=true\npublic_key=" + k2 + "\n"}},
		{"own key as peer ignored", []string{"private_key=" + privHex + "\npublic_key=" + self.Hex() + "\nallowed_ip=198.19.0.0/24\n"}},
		{"own key removes peer", []string{"public_key=" + self.Hex() + "\n", "private_key=" + privHex + "\n"}},
		{"error stops mid-way", []string{"public_key=" + k1 + "\nallowed_ip=198.19.0.0/24\nbogus=1\npublic_key=" + k2 + "\n"}},
		{"blank line ends request", []string{"public_key=" + k1 + "\n\npublic_key=" + k2 + "\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := refDevice(t, "")
			ours := ourDevice(t, "")
			for i, req := range tc.reqs {
				refErr := ref.IpcSet(req)
				ourErr := ours.IpcSet(strings.NewReader(req))
				if got, want := errnoOf(ourErr), errnoOf(refErr); got != want {
					t.Errorf("request %d: errno = %d (%v), want %d (%v)", i, got, ourErr, want, refErr)
				}
				refGet, err := ref.IpcGet()
				if err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				if err := ours.IpcGet(&b); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(normalize(refGet, ""), normalize(b.String(), "")); diff != "" {
					t.Errorf("request %d: get=1 mismatch (-wireguard-go +ours):\n%s", i, diff)
				}
			}
		})
	}
}

func errnoOf(err error) int64 {
	if err == nil {
		return 0
	}
	var ue *UAPIError
	if errors.As(err, &ue) {
		return ue.Code
	}
	var ie *device.IPCError
	if errors.As(err, &ie) {
		return ie.ErrorCode()
	}
	return -1
}

// TestWgToolMatchesWireguardGo runs Debian's wg(8) against our socket and
// against stock wireguard-go's, with the same configuration, and compares
// what `wg show` and `wg showconf` print.
func TestWgToolMatchesWireguardGo(t *testing.T) {
	testenv.Root(t)
	wg := testenv.Tool(t, "wg", "wireguard-tools")
	ourName, refName := uniqueName("wgpio"), uniqueName("wgref")
	refDevice(t, refName)
	ourDevice(t, ourName)

	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	priv, _ := hexKey(t)
	psk, _ := noise.NewPresharedKey()
	privFile := write("priv", priv.Base64())
	pskFile := write("psk", psk.Base64())
	k := func() string { kk, _ := hexKey(t); p := kk.PublicKey(); return p.Base64() }
	p1, p2, p3 := k(), k(), k()
	conf := write("conf", fmt.Sprintf(`[Interface]
PrivateKey = %s
ListenPort = 51999

[Peer]
PublicKey = %s
AllowedIPs = 198.19.7.0/24
Endpoint = 198.18.3.3:51820
`, priv.Base64(), p3))
	// p1 kept with its allowed IPs only: Debian's wg(8) v1.0.20210914
	// leaves the preshared key, endpoint and keepalive as they are (from
	// 780182e on, wg(8) clears the key and keepalive; compared above in
	// TestUAPISetMatchesWireguardGo), and removes p2.
	sync := write("sync", fmt.Sprintf(`[Interface]
PrivateKey = %s

[Peer]
PublicKey = %s
AllowedIPs = 198.19.3.0/24
`, priv.Base64(), p1))

	run := func(name string, args ...string) (string, error) {
		cmd := exec.Command(wg, args...)
		out, err := cmd.CombinedOutput()
		return strings.ReplaceAll(string(out), name, "NAME"), err
	}
	steps := [][]string{
		{"set", "NAME", "private-key", privFile, "listen-port", "51820", "fwmark", "0x1234"},
		{"set", "NAME", "peer", p1, "preshared-key", pskFile, "endpoint", "198.18.0.2:51820", "persistent-keepalive", "25", "allowed-ips", "198.19.0.0/24,2001:2::/64"},
		{"set", "NAME", "peer", p2, "endpoint", "[2001:2::2]:51820", "allowed-ips", "198.19.1.0/24"},
		// wg(8) v1.0.20210914 (Debian) cannot parse "+"/"-" yet: both fail
		// alike; allowed_ip=-x itself is compared in TestUAPISetMatchesWireguardGo.
		{"set", "NAME", "peer", p1, "allowed-ips", "+198.19.2.0/24,-198.19.0.0/24"},
		{"set", "NAME", "peer", p2, "allowed-ips", "198.19.2.0/24"},
		{"syncconf", "NAME", sync},
		{"set", "NAME", "peer", p1, "persistent-keepalive", "off"},
		{"set", "NAME", "peer", p2, "remove"},
		{"set", "NAME", "peer", p1, "endpoint", "not-an-endpoint"},
		{"set", "NAME", "listen-port", "99999"},
		{"setconf", "NAME", conf},
		{"addconf", "NAME", conf},
	}
	shows := [][]string{
		{"show", "NAME"}, {"showconf", "NAME"}, {"show", "NAME", "peers"}, {"show", "NAME", "allowed-ips"},
		{"show", "NAME", "endpoints"}, {"show", "NAME", "persistent-keepalive"}, {"show", "NAME", "fwmark"},
		{"show", "NAME", "listen-port"}, {"show", "NAME", "preshared-keys"}, {"show", "NAME", "public-key"},
	}
	compare := func(i int, args []string, wantSame bool) {
		sub := func(name string) []string {
			out := slices.Clone(args)
			for j := range out {
				if out[j] == "NAME" {
					out[j] = name
				}
			}
			return out
		}
		refOut, refErr := run(refName, sub(refName)...)
		ourOut, ourErr := run(ourName, sub(ourName)...)
		if (refErr == nil) != (ourErr == nil) {
			t.Errorf("step %d: wg %v: error %v, wireguard-go's %v\nours: %s\nwireguard-go: %s", i, args, ourErr, refErr, ourOut, refOut)
		}
		if diff := cmp.Diff(normalize(refOut, "NAME"), normalize(ourOut, "NAME")); diff != "" {
			t.Errorf("step %d: wg %v mismatch (-wireguard-go +ours):\n%s", i, args, diff)
		}
	}
	for i, s := range steps {
		compare(i, s, true)
		for _, show := range shows {
			compare(i, show, true)
		}
	}
	// The socket goes away with the device.
	sock := "/var/run/wireguard/" + ourName + ".sock"
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("socket %s missing while the device runs: %v", sock, err)
	}
}

func TestCloseRemovesSocket(t *testing.T) {
	testenv.Root(t)
	name := uniqueName("wgpio")
	d, err := New(Options{Name: name, Dataplane: newFakeDP(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	sock := "/var/run/wireguard/" + name + ".sock"
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("dial %s: %v", sock, err)
	}
	defer c.Close()
	fmt.Fprintf(c, "get=1\n\n")
	buf := make([]byte, 256)
	n, _ := c.Read(buf)
	if got := string(buf[:n]); !strings.HasSuffix(got, "errno=0\n\n") {
		t.Errorf("get=1 reply = %q, want it to end in errno=0", got)
	}
	d.Close()
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("after Close, stat %s = %v, want not exist", sock, err)
	}
}

// TestFixedListenPort: a dataplane whose port cannot move takes a set of
// the same listen_port (wg setconf sends it) and refuses another, which
// stays unapplied.
func TestFixedListenPort(t *testing.T) {
	f := newFakeDP(t)
	priv, _ := noise.NewPrivateKey()
	d, err := New(Options{PrivateKey: priv, Dataplane: f, ListenPort: 51820, FixedListenPort: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.IpcSet(strings.NewReader("listen_port=51820\n")); err != nil {
		t.Errorf("set listen_port to the same port: %v", err)
	}
	err = d.IpcSet(strings.NewReader("listen_port=40000\n"))
	var ue *UAPIError
	if !errors.As(err, &ue) || ue.Code != -int64(syscall.EOPNOTSUPP) {
		t.Errorf("set listen_port=40000: %v, want errno %d", err, -int64(syscall.EOPNOTSUPP))
	}
	var b strings.Builder
	d.IpcGet(&b)
	if !strings.Contains(b.String(), "listen_port=51820\n") {
		t.Errorf("get after a refused port change:\n%s", b.String())
	}
}

// TestIpcSetOperationLine: IpcSet given a whole request, its "set=1"
// line included (as https://www.wireguard.com/xplatform/ shows one), is
// refused with EINVAL, as wireguard-go refuses it, by an error that says
// to leave that line out: "invalid device key" alone sent an embedder
// looking for a bad key in a body it had copied from the protocol's page.
func TestIpcSetOperationLine(t *testing.T) {
	f := newFakeDP(t)
	priv, _ := noise.NewPrivateKey()
	d, err := New(Options{Dataplane: f})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.IpcSet(strings.NewReader("set=1\nprivate_key=" + priv.Hex() + "\n\n"))
	var ue *UAPIError
	if !errors.As(err, &ue) || ue.Code != ipc.IpcErrorInvalid {
		t.Fatalf("IpcSet of set=1 and a body: %v, want errno %d", err, ipc.IpcErrorInvalid)
	}
	if !strings.Contains(err.Error(), "without its set=1 line") {
		t.Errorf("IpcSet of set=1 and a body: %q does not say to leave the set=1 line out", err)
	}
	if d.PublicKey() != (noise.PublicKey{}) {
		t.Errorf("the private key after the set=1 line was applied")
	}
}

// TestEndpointZone: an endpoint with an IPv6 zone naming the WAN interface
// (by name or index) is taken, without the zone (the fast path sends on the
// WAN port only); another zone is refused (EINVAL) with a log line naming
// both interfaces.
func TestEndpointZone(t *testing.T) {
	var logs strings.Builder
	d, err := New(Options{Dataplane: newFakeDP(t), WANInterface: "wan0", WANIndex: 7,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	k, _ := noise.NewPrivateKey()
	pub := k.PublicKey()
	for _, tc := range []struct {
		ep, want string
		errno    int64
	}{
		{"[fe80::1%wan0]:51820", "endpoint=[fe80::1]:51820\n", 0},
		{"[fe80::2%7]:51820", "endpoint=[fe80::2]:51820\n", 0},
		{"[fe80::3%nosuchif0]:51820", "endpoint=[fe80::2]:51820\n", ipc.IpcErrorInvalid},
	} {
		err := d.IpcSet(strings.NewReader("public_key=" + pub.Hex() + "\nendpoint=" + tc.ep + "\n"))
		if errnoOf(err) != tc.errno {
			t.Errorf("endpoint %s: %v, want errno %d", tc.ep, err, tc.errno)
		}
		// The refusal names the zone and the WAN interface (the UAPI
		// socket logs it, warnUAPI).
		if err != nil && (!strings.Contains(err.Error(), `zone "nosuchif0"`) || !strings.Contains(err.Error(), `"wan0"`)) {
			t.Errorf("endpoint %s: %v, want the zone and the WAN interface named", tc.ep, err)
		}
		var b strings.Builder
		d.IpcGet(&b)
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("after endpoint %s: get=1 lacks %q:\n%s", tc.ep, tc.want, b.String())
		}
	}
}

// TestListenPortMoves: with SetListenPort, a UAPI set of another port moves
// the dataplane (and get reports the port it chose; 0 asks for any), the
// same port is not moved again, and a refusal is answered with its errno.
func TestListenPortMoves(t *testing.T) {
	var asked []uint16
	fail := false
	d, err := New(Options{Dataplane: newFakeDP(t), ListenPort: 51820, FixedListenPort: true,
		SetListenPort: func(p uint16) (uint16, error) {
			asked = append(asked, p)
			if fail {
				return 0, syscall.EADDRINUSE
			}
			if p == 0 {
				return 40123, nil
			}
			return p, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	get := func() string {
		var b strings.Builder
		d.IpcGet(&b)
		return b.String()
	}
	for _, tc := range []struct {
		set  string
		want string
	}{
		{"listen_port=51820\n", "listen_port=51820\n"},
		{"listen_port=40000\n", "listen_port=40000\n"},
		{"listen_port=0\n", "listen_port=40123\n"},
	} {
		if err := d.IpcSet(strings.NewReader(tc.set)); err != nil {
			t.Errorf("set %q: %v", tc.set, err)
		}
		if !strings.Contains(get(), tc.want) {
			t.Errorf("after %q: get lacks %q:\n%s", tc.set, tc.want, get())
		}
	}
	if fmt.Sprint(asked) != "[40000 0]" {
		t.Errorf("SetListenPort calls = %v, want [40000 0] (not for the port in use)", asked)
	}
	fail = true
	err = d.IpcSet(strings.NewReader("listen_port=50000\n"))
	if errnoOf(err) != -int64(syscall.EADDRINUSE) || !strings.Contains(get(), "listen_port=40123\n") {
		t.Errorf("refused move: %v (errno %d), get:\n%s; want EADDRINUSE and the old port", err, errnoOf(err), get())
	}
}

// warnCounter is a slog.Handler that counts the records at warning level
// or above and keeps their messages.
type warnCounter struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnCounter) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	w.msgs = append(w.msgs, r.Message)
	w.mu.Unlock()
	return nil
}
func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnCounter) WithGroup(string) slog.Handler      { return w }

// TestCloseLogsNoWarning: closing a device that serves its UAPI socket
// logs no warning. wireguard-go's UAPI listener reports its closing twice,
// as the listener's net.ErrClosed and as its socket watcher's error (the
// socket file gone, or its inotify descriptor closed: EBADF), in either
// order; the second must not read as an accept that failed.
func TestCloseLogsNoWarning(t *testing.T) {
	testenv.Root(t)
	for i := range 20 {
		h := &warnCounter{}
		d, err := New(Options{Name: uniqueName("wgpio"), Dataplane: newFakeDP(t), Logger: slog.New(h)})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		d.Close()
		if len(h.msgs) != 0 {
			t.Fatalf("close %d logged warnings %q, want none", i, h.msgs)
		}
	}
}
