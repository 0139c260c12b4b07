package config

import (
	"encoding/base64"
	"encoding/hex"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.zx2c4.com/wireguard/device"

	"github.com/wgpio/wgpio/internal/testing/downdev"
)

// hexKey turns a base64 key into the UAPI's hex form with the standard
// library only.
func hexKey(t testing.TB, b64 string) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// newDevice returns a stock wireguard-go device that stays down: a channel
// TUN (tun/tuntest) that never comes up, and the standard bind, which opens
// no socket while the device is down, so endpoints print as given
// (conn/bindtest's endpoints print as 127.0.0.1:port whatever they were set
// to, and a device up on the standard bind would send handshakes).
func newDevice(t *testing.T) *device.Device {
	t.Helper()
	dev := downdev.New()
	t.Cleanup(dev.Close)
	return dev
}

// uapiPeer is what IpcGet says of one peer, times and counters aside.
type uapiPeer struct {
	PresharedKey, Endpoint, Keepalive string
	AllowedIPs                        []string
}

// ipcState parses an IpcGet answer into the device's private key, listen
// port and peers by hex public key.
func ipcState(t *testing.T, dev *device.Device) (priv, port string, peers map[string]*uapiPeer) {
	t.Helper()
	s, err := dev.IpcGet()
	if err != nil {
		t.Fatalf("IpcGet() = %v", err)
	}
	peers = map[string]*uapiPeer{}
	var cur *uapiPeer
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "private_key":
			priv = v
		case "listen_port":
			port = v
		case "public_key":
			cur = &uapiPeer{}
			peers[v] = cur
		case "preshared_key":
			cur.PresharedKey = v
		case "endpoint":
			cur.Endpoint = v
		case "persistent_keepalive_interval":
			cur.Keepalive = v
		case "allowed_ip":
			cur.AllowedIPs = append(cur.AllowedIPs, v)
		}
	}
	for _, p := range peers {
		slices.Sort(p.AllowedIPs)
	}
	return priv, port, peers
}

// TestUAPIWireGuardGo applies File.UAPI to a stock wireguard-go device and
// checks what the device then reports through IpcGet: the known answer is
// wireguard-go's reading of our rendering, against values written by hand
// from the sample file.
func TestUAPIWireGuardGo(t *testing.T) {
	zero := strings.Repeat("0", 64)
	dev := newDevice(t)

	f, err := testOpts.Load(filepath.Join("testdata", "gateway.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.IpcSet(f.UAPI()); err != nil {
		t.Fatalf("IpcSet(gateway.conf UAPI) = %v; body:\n%s", err, f.UAPI())
	}
	priv, port, peers := ipcState(t, dev)
	if want := hexKey(t, priv1); priv != want {
		t.Errorf("private_key = %s, want %s", priv, want)
	}
	if port != "51820" {
		t.Errorf("listen_port = %q, want 51820", port)
	}
	want := map[string]*uapiPeer{
		hexKey(t, pub2): {
			PresharedKey: hexKey(t, psk),
			Endpoint:     "203.0.113.20:51820",
			Keepalive:    "25",
			AllowedIPs:   []string{"10.8.0.2/32", "192.168.20.0/24", "fd08::2/128"},
		},
		hexKey(t, pub3): {
			PresharedKey: zero,
			Keepalive:    "0",
			AllowedIPs:   []string{"10.8.0.3/32"},
		},
	}
	if diff := cmp.Diff(want, peers); diff != "" {
		t.Errorf("IpcGet peers after gateway.conf mismatch (-want +got):\n%s", diff)
	}

	// A second file replaces the first one's peers (replace_peers) and
	// gives a peer's allowed IPs anew (replace_allowed_ips), as `wg setconf`.
	f2, err := testOpts.Load(filepath.Join("testdata", "owned.conf"))
	if err != nil {
		t.Fatal(err)
	}
	f2.Peers = append(f2.Peers, Peer{
		PublicKey:  f.Peers[1].PublicKey,
		AllowedIPs: pfx("10.8.0.33/32"),
		Endpoint:   f.Peers[0].Endpoint,
	})
	if err := dev.IpcSet(f2.UAPI()); err != nil {
		t.Fatalf("IpcSet(owned.conf UAPI) = %v; body:\n%s", err, f2.UAPI())
	}
	priv, _, peers = ipcState(t, dev)
	if want := hexKey(t, priv2); priv != want {
		t.Errorf("private_key = %s, want %s", priv, want)
	}
	want = map[string]*uapiPeer{
		hexKey(t, pub1): {
			PresharedKey: zero,
			Endpoint:     "[2001:db8::10]:51820",
			Keepalive:    "0",
			AllowedIPs:   []string{"10.8.0.0/24", "192.168.10.0/24"},
		},
		hexKey(t, pub3): {
			PresharedKey: zero,
			Endpoint:     "203.0.113.20:51820",
			Keepalive:    "0",
			AllowedIPs:   []string{"10.8.0.33/32"},
		},
	}
	if diff := cmp.Diff(want, peers); diff != "" {
		t.Errorf("IpcGet peers after owned.conf mismatch (-want +got):\n%s", diff)
	}
}

// TestUAPIResolvedEndpoint: an Endpoint written as a host name reaches the
// device as the address the resolver gave.
func TestUAPIResolvedEndpoint(t *testing.T) {
	dev := newDevice(t)
	f, err := testOpts.Load(filepath.Join("testdata", "client.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.IpcSet(f.UAPI()); err != nil {
		t.Fatalf("IpcSet = %v; body:\n%s", err, f.UAPI())
	}
	_, port, peers := ipcState(t, dev)
	if port != "" {
		t.Errorf("listen_port = %q, want none", port)
	}
	p := peers[hexKey(t, pub1)]
	if p == nil {
		t.Fatalf("IpcGet peers = %v, want %s", peers, hexKey(t, pub1))
	}
	if p.Endpoint != "192.0.2.7:51820" {
		t.Errorf("endpoint = %q, want 192.0.2.7:51820", p.Endpoint)
	}
	if diff := cmp.Diff([]string{"0.0.0.0/0", "::/0"}, p.AllowedIPs); diff != "" {
		t.Errorf("allowed_ip mismatch (-want +got):\n%s", diff)
	}
}

// TestUAPIText pins the exact rendering of the sample gateway file.
func TestUAPIText(t *testing.T) {
	f, err := testOpts.Load(filepath.Join("testdata", "gateway.conf"))
	if err != nil {
		t.Fatal(err)
	}
	want := "listen_port=51820\n" +
		"private_key=" + hexKey(t, priv1) + "\n" +
		"replace_peers=true\n" +
		"public_key=" + hexKey(t, pub2) + "\n" +
		"preshared_key=" + hexKey(t, psk) + "\n" +
		"endpoint=203.0.113.20:51820\n" +
		"persistent_keepalive_interval=25\n" +
		"replace_allowed_ips=true\n" +
		"allowed_ip=10.8.0.2/32\n" +
		"allowed_ip=192.168.20.0/24\n" +
		"allowed_ip=fd08::2/128\n" +
		"public_key=" + hexKey(t, pub3) + "\n" +
		"replace_allowed_ips=true\n" +
		"allowed_ip=10.8.0.3/32\n"
	if diff := cmp.Diff(want, f.UAPI()); diff != "" {
		t.Errorf("UAPI() mismatch (-want +got):\n%s", diff)
	}
}

// TestSyncUAPI: SyncUAPI is what `wg syncconf` sends for a file: no
// replace_peers, a new peer's allowed IPs with replace_allowed_ips, a
// kept peer's as an edit (TestSyncUAPIKeepsRoutes), a removal for
// each running peer the file lacks, and fwmark whenever the file sets
// FwMark ("off" included, as wg(8) sends it), before the peers. A running
// peer the file keeps without PresharedKey or PersistentKeepalive has
// them cleared (wg(8) since wireguard-tools 780182e); a new peer does not,
// and no peer's endpoint is sent when the file has none. Before, a kept
// peer kept the preshared key and keepalive removed from the file.
func TestSyncUAPI(t *testing.T) {
	newPeer := priv2 // any 32 bytes: a peer the device does not have
	f, err := parseString("[Interface]\nPrivateKey = " + priv1 + "\nFwMark = off\n" +
		"[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 10.0.0.0/24\n" +
		"[Peer]\nPublicKey = " + newPeer + "\nAllowedIPs = 10.0.1.0/24\n")
	if err != nil {
		t.Fatal(err)
	}
	got := f.SyncUAPI([]RunningPeer{
		{PublicKey: hexKey(t, pub2), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.0.9.0/24")}},
		{PublicKey: hexKey(t, pub3), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.0.8.0/24")}},
	})
	want := "private_key=" + hexKey(t, priv1) + "\n" +
		"fwmark=0\n" +
		"public_key=" + hexKey(t, pub2) + "\npreshared_key=" + strings.Repeat("0", 64) +
		"\npersistent_keepalive_interval=0\nallowed_ip=10.0.0.0/24\nallowed_ip=-10.0.9.0/24\n" +
		"public_key=" + hexKey(t, newPeer) + "\nreplace_allowed_ips=true\nallowed_ip=10.0.1.0/24\n" +
		"public_key=" + hexKey(t, pub3) + "\nremove=true\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SyncUAPI mismatch (-want +got):\n%s", diff)
	}
	if u := f.UAPI(); strings.Contains(u, "fwmark") || !strings.Contains(u, "replace_peers=true\n") {
		t.Errorf("UAPI() = %q, want replace_peers and no fwmark line for FwMark = off", u)
	}
}
