package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Key pairs made with `wg genkey | tee priv | wg pubkey` (wireguard-tools),
// and a key from `wg genpsk`: the public halves are the known answers for the
// own-key check.
const (
	priv1 = "GCchTEm7noREIiwG/ALpM8MlTe/48SJMjs8cRCZIh2g="
	pub1  = "y0DM5LDZjOluhxWEIzKxcUsHuAvqBk4LqrZvW+/T+hE="
	priv2 = "wGwsOdpFZURCykVa/a+knRn/iaNkxYdyF59I6qhTtEs="
	pub2  = "FELmkFHd7oDx8G88ut8XjiVWGlhI1v1uP9JS3sNnVQM="
	priv3 = "wDN0ndu0VM7VAIeO+Y/CAJF0L1YMAMvk1a7gTluPRFU="
	pub3  = "f6bgPgWtjPOdODbvLt4CkmGff/N+rNV35Gq7i79C3Q4="
	psk   = "tBXGyHwNZqLhv8yArrGIJ5jbTpto+rugxSyutnuOlqI="
)

// key32 decodes a base64 key with the standard library only, so expected
// values do not depend on the code under test.
func key32(t testing.TB, s string) (k [32]byte) {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("bad test key %q", s)
	}
	copy(k[:], b)
	return k
}

// fakeResolve answers every name with 192.0.2.7 (or 2001:db8::7 for names
// starting with "v6."), except names starting with "nx", which fail as an
// unknown host would, names starting with "empty", which have no address,
// names starting with "blocked", which resolve to 0.0.0.0 and :: as a DNS
// block list answers, and names starting with "mixed", to 0.0.0.0 then
// 192.0.2.9.
func fakeResolve(host string) ([]netip.Addr, error) {
	switch {
	case strings.HasPrefix(host, "nx"):
		return nil, errors.New("no such host")
	case strings.HasPrefix(host, "empty"):
		return nil, nil
	case strings.HasPrefix(host, "blocked"):
		return []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()}, nil
	case strings.HasPrefix(host, "mixed"):
		return []netip.Addr{netip.IPv4Unspecified(), netip.MustParseAddr("192.0.2.9")}, nil
	case strings.HasPrefix(host, "v6."):
		return []netip.Addr{netip.MustParseAddr("2001:db8::7"), netip.MustParseAddr("192.0.2.8")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("192.0.2.7")}, nil
}

var testOpts = Options{Resolve: fakeResolve}

func parseString(text string) (*File, error) {
	return testOpts.Parse("wg0.conf", strings.NewReader(text))
}

func pfx(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, x := range s {
		out[i] = netip.MustParsePrefix(x)
	}
	return out
}

// fileCmp compares Files, keys by value.
var fileCmp = []cmp.Option{
	cmpopts.IgnoreFields(Interface{}, "Lines"), // checked apart
	cmpopts.IgnoreFields(WGPIO{}, "Lines"),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b }),
	cmpopts.EquateEmpty(),
}

func TestParseGateway(t *testing.T) {
	f, err := testOpts.Load(filepath.Join("testdata", "gateway.conf"))
	if err != nil {
		t.Fatalf("Load(gateway.conf) = %v, want no error", err)
	}
	want := &File{
		Name: filepath.Join("testdata", "gateway.conf"),
		Interface: Interface{
			PrivateKey: key32(t, priv1),
			ListenPort: 51820,
			Addresses:  pfx("10.8.0.1/24", "fd08::1/64"),
			MTU:        1420,
		},
		WGPIO: WGPIO{
			Mode:           ModeFastPath,
			WAN:            "eth0",
			LAN:            "eth1",
			AddressMode:    AddressShared,
			Queues:         2,
			CPUs:           []int{0, 1},
			SourcePorts:    PortRange{51820, 51823},
			XDPMode:        XDPAuto,
			MetricsAddress: "127.0.0.1:9586",
		},
		Peers: []Peer{{
			Line:                21,
			PublicKey:           key32(t, pub2),
			PresharedKey:        key32(t, psk),
			AllowedIPs:          pfx("10.8.0.2/32", "192.168.20.0/24", "fd08::2/128"),
			Endpoint:            netip.MustParseAddrPort("203.0.113.20:51820"),
			PersistentKeepalive: 25,
		}, {
			Line:       30,
			PublicKey:  key32(t, pub3),
			AllowedIPs: pfx("10.8.0.3/32"),
		}},
	}
	if diff := cmp.Diff(want, f, fileCmp...); diff != "" {
		t.Errorf("Load(gateway.conf) mismatch (-want +got):\n%s", diff)
	}
	if f.WGPIO.Lines["CPUs"] != 16 || f.Interface.Lines["ListenPort"] == 0 || f.Interface.Lines["PrivateKey"] == 0 {
		t.Errorf("Lines: CPUs at %d, want 16; Interface lines %v", f.WGPIO.Lines["CPUs"], f.Interface.Lines)
	}
	if got := f.WGPIO.SourcePorts.Len(); got != 4 {
		t.Errorf("SourcePorts.Len() = %d, want 4", got)
	}
}

func TestParseOwned(t *testing.T) {
	f, err := testOpts.Load(filepath.Join("testdata", "owned.conf"))
	if err != nil {
		t.Fatalf("Load(owned.conf) = %v, want no error", err)
	}
	w := f.WGPIO
	if w.AddressMode != AddressOwned || w.WANAddress != netip.MustParsePrefix("198.18.0.2/24") ||
		w.LANAddress != netip.MustParsePrefix("198.19.0.1/24") || w.Gateway != netip.MustParseAddr("198.18.0.1") ||
		w.XDPMode != XDPNative {
		t.Errorf("Load(owned.conf).WGPIO = %+v, want owned 198.18.0.2/24 198.19.0.1/24 via 198.18.0.1, native", w)
	}
	if got, want := f.Peers[0].Endpoint, netip.MustParseAddrPort("[2001:db8::10]:51820"); got != want {
		t.Errorf("Endpoint = %v, want %v", got, want)
	}
	if len(f.Warnings) != 0 {
		t.Errorf("Warnings = %v, want none", f.Warnings)
	}
}

func TestParseClientWarnings(t *testing.T) {
	f, err := testOpts.Load(filepath.Join("testdata", "client.conf"))
	if err != nil {
		t.Fatalf("Load(client.conf) = %v, want no error", err)
	}
	var got []string
	for _, w := range f.Warnings {
		got = append(got, w.String())
	}
	want := []string{
		`testdata/client.conf:6: key "DNS": ignored: wgpio sets no DNS resolver (wg-quick calls resolvconf); set the host's resolver yourself`,
		`testdata/client.conf:7: key "PostUp": ignored: wgpio runs no commands (wg-quick runs them with bash); run it from ExecStartPost= in a drop-in of wgpio@.service (systemctl edit wgpio@NAME)`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Warnings mismatch (-want +got):\n%s", diff)
	}
	wantUnused := []Setting{{6, "DNS", "10.8.0.1"}, {7, "PostUp", `logger "wg up"`}}
	if diff := cmp.Diff(wantUnused, f.Interface.Unused); diff != "" {
		t.Errorf("Unused mismatch (-want +got):\n%s", diff)
	}
	p := f.Peers[0]
	if p.EndpointHost != "vpn.example.com" || p.Endpoint != netip.MustParseAddrPort("192.0.2.7:51820") {
		t.Errorf("Endpoint = %q %v, want vpn.example.com 192.0.2.7:51820", p.EndpointHost, p.Endpoint)
	}
	if p.PersistentKeepalive != 0 {
		t.Errorf("PersistentKeepalive = %d, want 0 (off)", p.PersistentKeepalive)
	}
}

// TestParseSyntax covers the lexical rules: case, spacing, comments, lists,
// repeated list keys, CRLF, bare addresses.
func TestParseSyntax(t *testing.T) {
	text := "  [ interface ]  \r\n" +
		"privatekey=" + priv1 + "   ; trailing comment\r\n" +
		"ADDRESS = 10.0.0.1 ,fd00::1\n" +
		"\taddress\t=\t10.1.0.1/16,\n" +
		"# PostUp = a comment, not a key\n" +
		"\n" +
		"[PEER]\n" +
		"PublicKey =" + pub2 + "#comment\n" +
		"allowedips = 10.0.0.2/32,  10.9.0.0/16\n" +
		"AllowedIPs = fd00::/8 ; site B's prefix, a comment\n" +
		"endpoint = v6.example.net:1\n" +
		"persistentkeepalive = 0\n" +
		"[wgpio]\n" +
		"mode = COMPAT-MQTUN\n" +
		"cpus = 3, 0-1 ,7-8\n" +
		"sourceports = 51820\n"
	f, err := parseString(text)
	if err != nil {
		t.Fatalf("Parse = %v, want no error", err)
	}
	if diff := cmp.Diff(pfx("10.0.0.1/32", "fd00::1/128", "10.1.0.1/16"), f.Interface.Addresses, fileCmp...); diff != "" {
		t.Errorf("Addresses mismatch (-want +got):\n%s", diff)
	}
	p := f.Peers[0]
	if diff := cmp.Diff(pfx("10.0.0.2/32", "10.9.0.0/16", "fd00::/8"), p.AllowedIPs, fileCmp...); diff != "" {
		t.Errorf("AllowedIPs mismatch (-want +got):\n%s", diff)
	}
	if got, want := p.Endpoint, netip.MustParseAddrPort("[2001:db8::7]:1"); got != want {
		t.Errorf("Endpoint = %v, want %v (the resolver's first address)", got, want)
	}
	if f.WGPIO.Mode != ModeCompatMQTUN {
		t.Errorf("Mode = %q, want %q", f.WGPIO.Mode, ModeCompatMQTUN)
	}
	if diff := cmp.Diff([]int{3, 0, 1, 7, 8}, f.WGPIO.CPUs); diff != "" {
		t.Errorf("CPUs mismatch (-want +got):\n%s", diff)
	}
	if f.WGPIO.SourcePorts != (PortRange{51820, 51820}) {
		t.Errorf("SourcePorts = %v, want 51820-51820", f.WGPIO.SourcePorts)
	}
	if len(f.Warnings) != 0 {
		t.Errorf("Warnings = %v, want none", f.Warnings)
	}
}

func TestParseWarnings(t *testing.T) {
	text := "[Interface]\nPrivateKey = " + priv1 + "\n" +
		"FwMark = 0x1234\nTable = off\nSaveConfig = true\n" +
		"[Peer]\nPublicKey = " + pub2 + "\n" +
		"[Peer]\nPublicKey = " + pub3 + "\nAllowedIPs = 10.0.0.1/24, 2001:db8::1/32\n"
	f, err := parseString(text)
	if err != nil {
		t.Fatalf("Parse = %v, want no error", err)
	}
	var got []string
	for _, w := range f.Warnings {
		got = append(got, w.String())
	}
	want := []string{
		`wg0.conf:4: key "Table": ignored: wgpio routes by the peers' AllowedIPs itself whatever Table says (off does not stop it, a table number puts no routes in that table); add policy routing yourself`,
		`wg0.conf:5: key "SaveConfig": ignored: wgpio never writes the file (wg-quick saves the device's state at down); what wg set changes lasts until the next start unless you put it in the file`,
		`wg0.conf:6: [Peer] has no AllowedIPs; no traffic will pass to or from it`,
		`wg0.conf:10: key "AllowedIPs": 10.0.0.1/24 has host bits set; it means 10.0.0.0/24`,
		`wg0.conf:10: key "AllowedIPs": 2001:db8::1/32 has host bits set; it means 2001:db8::/32`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Warnings mismatch (-want +got):\n%s", diff)
	}
	if f.Interface.FwMark != 0x1234 {
		t.Errorf("FwMark = %#x, want 0x1234", f.Interface.FwMark)
	}
	if diff := cmp.Diff(pfx("10.0.0.0/24", "2001:db8::/32"), f.Peers[1].AllowedIPs, fileCmp...); diff != "" {
		t.Errorf("AllowedIPs mismatch (-want +got):\n%s", diff)
	}
}

// iface is a valid [Interface] on lines 1-2: a bad line after it is line 3.
const iface = "[Interface]\nPrivateKey = " + priv1 + "\n"

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"port too big", iface + "ListenPort = 70000\n", `wg0.conf:3: key "ListenPort": port 70000 out of range 1-65535`},
		{"port zero", iface + "ListenPort = 0\n", `wg0.conf:3: key "ListenPort": port 0 out of range 1-65535 (wg(8)'s random port: leave the key out for that in compat-mqtun mode, or for 51820 in fast-path mode; compat mode needs a port named)`},
		{"port huge", iface + "ListenPort = 99999999999999999999\n", `wg0.conf:3: key "ListenPort": port 99999999999999999999 out of range 1-65535`},
		{"port not a number", iface + "ListenPort = 51820x\n", `wg0.conf:3: key "ListenPort": port "51820x" is not a number`},
		{"port negative", iface + "ListenPort = -1\n", `wg0.conf:3: key "ListenPort": port -1 out of range 1-65535`},
		{"mtu negative", iface + "MTU = -1\n", `wg0.conf:3: key "MTU": -1 out of range 68-65535`},
		{"private key not base64", "[Interface]\nPrivateKey = not-a-key\n", `wg0.conf:2: key "PrivateKey": not a base64 32-byte key`},
		{"private key 31 bytes", "[Interface]\nPrivateKey = " + base64.StdEncoding.EncodeToString(make([]byte, 31)) + "\n", `wg0.conf:2: key "PrivateKey": not a base64 32-byte key`},
		{"private key 33 bytes", "[Interface]\nPrivateKey = " + base64.StdEncoding.EncodeToString(make([]byte, 33)) + "\n", `wg0.conf:2: key "PrivateKey": not a base64 32-byte key`},
		{"no interface", "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 10.0.0.2/32\n", `wg0.conf: no [Interface] section`},
		{"empty file", "", `wg0.conf: no [Interface] section`},
		{"no private key", "[Interface]\nListenPort = 51820\n", `wg0.conf:1: [Interface] has no PrivateKey`},
		{"private key from a hook", "[Interface]\nListenPort = 51820\nPostUp = wg set %i private-key /etc/wireguard/wg0.key\n", `wg0.conf:1: [Interface] has no PrivateKey: the PostUp at line 3 that sets it is not run (wgpio runs no commands); write the key in the file, PrivateKey = <the key's base64>, and keep the file from other users (chmod 0600, or 0640 for the unit's group)`},
		{"typo", iface + "ListenPrt = 1\n", `wg0.conf:3: key "ListenPrt": unknown key in [Interface]; did you mean "ListenPort"?`},
		{"typo case", iface + "privatkey = 1\n", `wg0.conf:3: key "privatkey": unknown key in [Interface]; did you mean "PrivateKey"?`},
		{"wrong section", iface + "PublicKey = " + pub2 + "\n", `wg0.conf:3: key "PublicKey": unknown key in [Interface]; it belongs in [Peer]`},
		{"wgpio key in peer", iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 10.0.0.2/32\nqueues = 2\n", `wg0.conf:6: key "queues": unknown key in [Peer]; it belongs in [WGPIO]`},
		{"unknown key", iface + "Frobnicate = 1\n", `wg0.conf:3: key "Frobnicate": unknown key in [Interface], which has PrivateKey, ListenPort, Address, MTU, DNS, Table, PreUp, PostUp, PreDown, PostDown, SaveConfig, FwMark (all keys: go doc github.com/wgpio/wgpio/config)`},
		{"unknown section", iface + "[Peers]\nPublicKey = " + pub2 + "\n", `wg0.conf:3: unknown section [Peers]; want [Interface], [Peer] or [WGPIO]`},
		{"malformed header", iface + "[Peer\n", `wg0.conf:3: malformed section header "[Peer"; want [Interface], [Peer] or [WGPIO]`},
		{"header with junk", iface + "[Peer] x\n", `wg0.conf:3: malformed section header "[Peer] x"; want [Interface], [Peer] or [WGPIO]`},
		{"no equals", iface + "ListenPort 51820\n", `wg0.conf:3: "ListenPort 51820": want "Key = Value" or a [Section] header`},
		{"no key", iface + "= 51820\n", `wg0.conf:3: "= 51820": no key before '='`},
		{"outside section", "PrivateKey = " + priv1 + "\n" + iface, `wg0.conf:1: key "PrivateKey": outside any section; put it under [Interface], [Peer] or [WGPIO]`},
		{"repeated key", iface + "ListenPort = 1\nlistenport = 2\n", `wg0.conf:4: key "ListenPort": repeated; first set at line 3`},
		{"repeated private key", iface + "PrivateKey = " + priv2 + "\n", `wg0.conf:3: key "PrivateKey": repeated; first set at line 2`},
		{"repeated interface", iface + "[Interface]\nListenPort = 1\n", `wg0.conf:3: repeated [Interface] section; first at line 1`},
		{"repeated wgpio", iface + "[WGPIO]\nQueues = 1\n[WGPIO]\nQueues = 2\n", `wg0.conf:5: repeated [WGPIO] section; first at line 3`},
		{"empty value", iface + "MTU =\n", `wg0.conf:3: key "MTU": empty value`},
		{"mtu too small", iface + "MTU = 20\n", `wg0.conf:3: key "MTU": 20 out of range 68-65535`},
		{"mtu too big", iface + "MTU = 65536\n", `wg0.conf:3: key "MTU": 65536 out of range 68-65535`},
		{"mtu not a number", iface + "MTU = 1420 bytes\n", `wg0.conf:3: key "MTU": "1420 bytes" is not a number`},
		{"mtu below ipv6 minimum", iface + "Address = 10.0.0.1/24, fd00::1/64\nMTU = 1000\n", `wg0.conf:4: key "MTU": 1000 is below 1280, IPv6's minimum (RFC 8200 section 5), with IPv6 Address fd00::1/64`},
		{"bad address", iface + "Address = 10.0.0.300/24\n", `wg0.conf:3: key "Address": "10.0.0.300/24" is not an IP address or CIDR`},
		{"address prefix too long", iface + "Address = 10.0.0.1/33\n", `wg0.conf:3: key "Address": "10.0.0.1/33" is not an IP address or CIDR`},
		{"address with zone", iface + "Address = fe80::1%eth0\n", `wg0.conf:3: key "Address": "fe80::1%eth0" is not an IP address or CIDR`},
		{"unspecified address", iface + "Address = 0.0.0.0/0\n", `wg0.conf:3: key "Address": "0.0.0.0/0" is not a unicast address this interface can have (write its own address, as in 10.0.0.1/24)`},
		{"unspecified IPv6 address", iface + "Address = ::/0\n", `wg0.conf:3: key "Address": "::/0" is not a unicast address this interface can have (write its own address, as in 10.0.0.1/24)`},
		{"multicast address", iface + "Address = 224.0.0.1/32\n", `wg0.conf:3: key "Address": "224.0.0.1/32" is not a unicast address this interface can have (write its own address, as in 10.0.0.1/24)`},
		{"loopback address", iface + "Address = 10.0.0.1/24, 127.0.0.1/8\n", `wg0.conf:3: key "Address": "127.0.0.1/8" is not a unicast address this interface can have (write its own address, as in 10.0.0.1/24)`},
		{"broadcast address", iface + "Address = 255.255.255.255\n", `wg0.conf:3: key "Address": "255.255.255.255" is not a unicast address this interface can have (write its own address, as in 10.0.0.1/24)`},
		{"mapped address", iface + "Address = ::ffff:198.19.60.1/120\n", `wg0.conf:3: key "Address": "::ffff:198.19.60.1/120" is an IPv4-mapped IPv6 address; write the IPv4 address (198.19.60.1)`},
		{"mapped allowed IPs", iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = ::ffff:198.19.70.0/120\n", `wg0.conf:5: key "AllowedIPs": "::ffff:198.19.70.0/120" is an IPv4-mapped IPv6 address; write the IPv4 address (198.19.70.0)`},
		{"endpoint with zone", iface + "[Peer]\nPublicKey = " + pub2 + "\nEndpoint = [fe80::1%nosuchif0]:51820\n", `wg0.conf:5: key "Endpoint": "fe80::1%nosuchif0": an address with a zone (%nosuchif0) is not supported; use a global address`},
		{"peer without public key", iface + "[Peer]\nAllowedIPs = 10.0.0.2/32\n", `wg0.conf:3: [Peer] has no PublicKey`},
		{"bad public key", iface + "[Peer]\nPublicKey = abcd\n", `wg0.conf:4: key "PublicKey": not a base64 32-byte key (a key is 44 characters of base64, the last one '=', as ` + "`wg genkey`, `wg pubkey` and `wg genpsk`" + ` print it; this one has 4: copy it whole)`},
		{"duplicate public key", iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 10.0.0.2/32\n[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 10.0.0.3/32\n", `wg0.conf:7: key "PublicKey": duplicate peer; the [Peer] at line 3 has the same PublicKey`},
		{"own public key", iface + "[Peer]\nPublicKey = " + pub1 + "\nAllowedIPs = 10.0.0.2/32\n", `wg0.conf:4: key "PublicKey": the interface's own public key; a peer cannot be this interface`},
		{"bad preshared key", iface + "[Peer]\nPublicKey = " + pub2 + "\nPresharedKey = " + psk[:40] + "\n", `wg0.conf:5: key "PresharedKey": not a base64 32-byte key (a key is 44 characters of base64, the last one '=', as ` + "`wg genkey`, `wg pubkey` and `wg genpsk`" + ` print it; this one has 40: copy it whole)`},
		{"bad allowed ip", iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 10.0.0.0/8, 10.0.0.0/-1\n", `wg0.conf:5: key "AllowedIPs": "10.0.0.0/-1" is not an IP address or CIDR`},
		// wg(8) refuses both ("AllowedIP is not in the correct
		// format"); the ';' one lost 10.0.1.0/24 without a word, read
		// as a comment.
		{"allowed ips after semicolon", iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 10.0.0.0/24; 10.0.1.0/24, 10.0.2.0/24\n", `wg0.conf:5: key "AllowedIPs": "10.0.1.0/24, 10.0.2.0/24" after ';' would not be read: ';' starts a comment; separate several with ','`},
		{"address after semicolon", "[Interface]\nPrivateKey = " + priv1 + "\nAddress = 10.8.0.1/24 ; fd00::1/64\n", `wg0.conf:3: key "Address": "fd00::1/64" after ';' would not be read: ';' starts a comment; separate several with ','`},
		// wg(8) setconf refuses an empty item ("Unable to parse IP
		// address: `'"), and a line without a value ("Line
		// unrecognized"), and so the whole file; Address, which
		// wg-quick splits itself, may have one (TestParseSyntax).
		{"allowed ips empty item", iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 198.18.0.0/24,,198.18.1.0/24\n", `wg0.conf:5: key "AllowedIPs": an empty item after "198.18.0.0/24": wg(8) refuses the line; remove the extra ','`},
		{"allowed ips trailing comma", iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 198.18.0.0/24, \n", `wg0.conf:5: key "AllowedIPs": an empty item after "198.18.0.0/24": wg(8) refuses the line; remove the extra ','`},
		{"allowed ips leading comma", iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = , 198.18.0.0/24\n", `wg0.conf:5: key "AllowedIPs": an empty item before "198.18.0.0/24": wg(8) refuses the line; remove the extra ','`},
		{"allowed ips empty value", iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs =\n", `wg0.conf:5: key "AllowedIPs": empty value: wg(8) refuses the line; give the prefixes, or remove the line`},
		{"allowed ips comment only", iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = # none yet\n", `wg0.conf:5: key "AllowedIPs": empty value: wg(8) refuses the line; give the prefixes, or remove the line`},
		{"allowed ips commas only", iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = ,\n", `wg0.conf:5: key "AllowedIPs": an empty item (the list is commas only): wg(8) refuses the line; remove the extra ','`},
		{"allowed ips space separated", iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 10.0.0.0/24 10.0.1.0/24\n", `wg0.conf:5: key "AllowedIPs": "10.0.0.0/24 10.0.1.0/24" is not an IP address or CIDR: separate several with ',', as in 10.0.0.0/24, 10.0.1.0/24`},
		{"endpoint no port", iface + "[Peer]\nPublicKey = " + pub2 + "\nEndpoint = 203.0.113.1\n", `wg0.conf:5: key "Endpoint": "203.0.113.1" has no port; want host:port or [IPv6]:port`},
		{"endpoint ipv6 without brackets", iface + "[Peer]\nPublicKey = " + pub2 + "\nEndpoint = 2001:db8::1:51820\n", `wg0.conf:5: key "Endpoint": "2001:db8::1:51820": an IPv6 address needs brackets, as in [2001:db8::1]:51820`},
		{"endpoint port zero", iface + "[Peer]\nPublicKey = " + pub2 + "\nEndpoint = 203.0.113.1:0\n", `wg0.conf:5: key "Endpoint": port 0 out of range 1-65535`},
		{"endpoint empty port", iface + "[Peer]\nPublicKey = " + pub2 + "\nEndpoint = 203.0.113.1:\n", `wg0.conf:5: key "Endpoint": port "" is not a number`},
		{"endpoint brackets ipv4", iface + "[Peer]\nPublicKey = " + pub2 + "\nEndpoint = [203.0.113.1]:51820\n", `wg0.conf:5: key "Endpoint": "203.0.113.1" is not an IPv6 address`},
		{"endpoint brackets no port", iface + "[Peer]\nPublicKey = " + pub2 + "\nEndpoint = [2001:db8::1]\n", `wg0.conf:5: key "Endpoint": "[2001:db8::1]": want [IPv6]:port`},
		{"endpoint bad host", iface + "[Peer]\nPublicKey = " + pub2 + "\nEndpoint = bad!host:51820\n", `wg0.conf:5: key "Endpoint": "bad!host" is not an IP address or a host name`},
		{"endpoint unresolved", iface + "[Peer]\nPublicKey = " + pub2 + "\nEndpoint = nx.example.com:51820\n", `wg0.conf:5: key "Endpoint": resolve "nx.example.com": no such host`},
		{"endpoint blocked", iface + "[Peer]\nPublicKey = " + pub2 + "\nEndpoint = blocked.example.com:51820\n", `wg0.conf:5: key "Endpoint": resolve "blocked.example.com": 0.0.0.0, ::, not a unicast address (a DNS block list answers so for a name it blocks)`},
		{"endpoint no addresses", iface + "[Peer]\nPublicKey = " + pub2 + "\nEndpoint = empty.example.com:51820\n", `wg0.conf:5: key "Endpoint": resolve "empty.example.com": no addresses`},
		{"keepalive negative", iface + "[Peer]\nPublicKey = " + pub2 + "\nPersistentKeepalive = -5\n", `wg0.conf:5: key "PersistentKeepalive": -5 out of range 0-65535 (a number of seconds or "off")`},
		{"keepalive not a number", iface + "[Peer]\nPublicKey = " + pub2 + "\nPersistentKeepalive = never\n", `wg0.conf:5: key "PersistentKeepalive": "never" is not a number of seconds or "off"`},
		{"keepalive too big", iface + "[Peer]\nPublicKey = " + pub2 + "\nPersistentKeepalive = 65536\n", `wg0.conf:5: key "PersistentKeepalive": 65536 out of range 0-65535 (a number of seconds or "off")`},
		{"mode", iface + "[WGPIO]\nMode = turbo\n", `wg0.conf:4: key "Mode": "turbo" is not one of fastpath, compat, compat-mqtun`},
		{"address mode", iface + "[WGPIO]\nAddressMode = mine\n", `wg0.conf:4: key "AddressMode": "mine" is not one of shared, owned`},
		{"xdp mode", iface + "[WGPIO]\nXDPMode = offload\n", `wg0.conf:4: key "XDPMode": "offload" is not one of auto, native, generic`},
		{"queues zero", iface + "[WGPIO]\nQueues = 0\n", `wg0.conf:4: key "Queues": 0 out of range 1-256`},
		{"mss clamp word", iface + "[WGPIO]\nMSSClamp = yes\n", `wg0.conf:4: key "MSSClamp": "yes" is not a number of bytes, "auto" or "off"`},
		{"mss clamp small", iface + "[WGPIO]\nMSSClamp = 100\n", `wg0.conf:4: key "MSSClamp": 100 out of range 536-65495 (a number of bytes, "auto" or "off")`},
		{"handshake workers zero", iface + "[WGPIO]\nHandshakeWorkers = 0\n", `wg0.conf:4: key "HandshakeWorkers": 0 out of range 1-1024`},
		{"replay window size", iface + "[WGPIO]\nReplayWindow = 4096\n", `wg0.conf:4: key "ReplayWindow": "4096" is not "auto", 8128 or 131008 (counters)`},
		{"icmp rate zero", iface + "[WGPIO]\nICMPRate = 0\n", `wg0.conf:4: key "ICMPRate": 0 out of range 1-1000000 (a number of messages per second or "off")`},
		{"icmp dest interval zero", iface + "[WGPIO]\nICMPDestInterval = 0\n", `wg0.conf:4: key "ICMPDestInterval": 0 out of range 1-3600000 (a number of milliseconds or "off")`},
		{"icmp burst zero", iface + "[WGPIO]\nICMPBurst = 0\n", `wg0.conf:4: key "ICMPBurst": 0 out of range 1-1000000 (a number of messages)`},
		{"icmp burst word", iface + "[WGPIO]\nICMPBurst = off\n", `wg0.conf:4: key "ICMPBurst": "off" is not a number of messages`},
		{"icmp dest interval", iface + "[WGPIO]\nICMPDestInterval = 1s\n", `wg0.conf:4: key "ICMPDestInterval": "1s" is not a number of milliseconds or "off"`},
		{"queues too many", iface + "[WGPIO]\nQueues = 257\n", `wg0.conf:4: key "Queues": 257 out of range 1-256`},
		{"vlan zero", iface + "[WGPIO]\nLANVLAN = 0\n", `wg0.conf:4: key "LANVLAN": 0 out of range 1-4094 (an IEEE 802.1Q VLAN identifier; leave the key out for untagged frames)`},
		{"vlan reserved", iface + "[WGPIO]\nWANVLAN = 4095\n", `wg0.conf:4: key "WANVLAN": 4095 out of range 1-4094 (an IEEE 802.1Q VLAN identifier; leave the key out for untagged frames)`},
		{"vlan not a number", iface + "[WGPIO]\nWANVLAN = eth0.100\n", `wg0.conf:4: key "WANVLAN": "eth0.100" is not a number (an IEEE 802.1Q VLAN identifier; leave the key out for untagged frames)`},
		{"cpus backwards", iface + "[WGPIO]\nCPUs = 3-1\n", `wg0.conf:4: key "CPUs": "3-1" is not a CPU list like 0-1,3`},
		{"cpus garbage", iface + "[WGPIO]\nCPUs = all\n", `wg0.conf:4: key "CPUs": "all" is not a CPU list like 0-1,3`},
		{"cpus twice", iface + "[WGPIO]\nCPUs = 0-2,1\n", `wg0.conf:4: key "CPUs": CPU 1 listed twice`},
		{"cpus too big", iface + "[WGPIO]\nCPUs = 0-9000\n", `wg0.conf:4: key "CPUs": CPU 9000 out of range 0-8191`},
		{"cpus empty", iface + "[WGPIO]\nCPUs = ,\n", `wg0.conf:4: key "CPUs": empty CPU list`},
		{"source ports backwards", iface + "[WGPIO]\nSourcePorts = 51835-51820\n", `wg0.conf:4: key "SourcePorts": range "51835-51820" runs backwards; want first-last, as in 51820-51835`},
		{"source ports range", iface + "[WGPIO]\nSourcePorts = 65535-65536\n", `wg0.conf:4: key "SourcePorts": port 65536 out of range 1-65535`},
		{"wan name", iface + "[WGPIO]\nWAN = eth0/1\n", `wg0.conf:4: key "WAN": "eth0/1" is not an interface name (1-15 bytes, no '/' or spaces)`},
		{"lan name too long", iface + "[WGPIO]\nLAN = abcdefghijklmnop\n", `wg0.conf:4: key "LAN": "abcdefghijklmnop" is not an interface name (1-15 bytes, no '/' or spaces)`},
		{"wan address bare", iface + "[WGPIO]\nAddressMode = owned\nWANAddress = 198.18.0.2\nLANAddress = 198.19.0.1/24\n", `wg0.conf:5: key "WANAddress": "198.18.0.2" is not a CIDR like 198.18.0.2/24`},
		{"wan address in shared mode", iface + "[WGPIO]\nWANAddress = 198.18.0.2/24\n", `wg0.conf:4: key "WANAddress": used only with AddressMode = owned`},
		{"gateway in default mode", iface + "[WGPIO]\nAddressMode = shared\nGateway = 198.18.0.1\n", `wg0.conf:5: key "Gateway": used only with AddressMode = owned`},
		{"owned without addresses", iface + "[WGPIO]\nAddressMode = owned\n", `wg0.conf:4: key "AddressMode": owned needs WANAddress and LANAddress`},
		{"owned without lan address", iface + "[WGPIO]\nAddressMode = owned\nWANAddress = 198.18.0.2/24\n", `wg0.conf:4: key "AddressMode": owned needs LANAddress`},
		{"gateway off link", iface + "[WGPIO]\nAddressMode = owned\nWANAddress = 198.18.0.2/24\nLANAddress = 198.19.0.1/24\nGateway = 198.18.9.1\n", `wg0.conf:7: key "Gateway": 198.18.9.1 is not in WANAddress 198.18.0.2/24`},
		{"gateway not an address", iface + "[WGPIO]\nAddressMode = owned\nWANAddress = 198.18.0.2/24\nLANAddress = 198.19.0.1/24\nGateway = router\n", `wg0.conf:7: key "Gateway": "router" is not an IP address`},
		{"metrics no port", iface + "[WGPIO]\nMetricsAddress = 9586\n", `wg0.conf:4: key "MetricsAddress": "9586" is not host:port`},
		{"metrics bad port", iface + "[WGPIO]\nMetricsAddress = :http\n", `wg0.conf:4: key "MetricsAddress": port "http" is not a number`},
		{"metrics peers zero", iface + "[WGPIO]\nMetricsPeers = 0\n", `wg0.conf:4: key "MetricsPeers": 0 out of range 1-1000000 (a number of peers or "off")`},
		{"metrics peers word", iface + "[WGPIO]\nMetricsPeers = all\n", `wg0.conf:4: key "MetricsPeers": "all" is not a number of peers or "off"`},
		{"key pasted alone", iface + priv2 + "\n", `wg0.conf:3: (a key) is not a key name; want "Key = Value" or a [Section] header`},
		{"key pasted unpadded", iface + priv2[:43] + "\n", `wg0.conf:3: (a key): want "Key = Value" or a [Section] header`},
		{"key name with spaces", iface + "Listen Port = 1\n", `wg0.conf:3: "Listen Port" is not a key name; want "Key = Value" or a [Section] header`},
		{"line too long", iface + "DNS = " + strings.Repeat("x", MaxLine) + "\n", fmt.Sprintf(`wg0.conf:3: line longer than %d bytes (a long AllowedIPs or Address list can be split over several lines: they add up)`, MaxLine)},
		{
			"every problem reported",
			"[Interface]\nPrivateKey = " + priv1 + "\nListenPort = 70000\nMTU = x\n[Peer]\nEndpoint = 203.0.113.1\n[Bogus]\nkey = value\n",
			`wg0.conf:3: key "ListenPort": port 70000 out of range 1-65535` + "\n" +
				`wg0.conf:4: key "MTU": "x" is not a number` + "\n" +
				`wg0.conf:6: key "Endpoint": "203.0.113.1" has no port; want host:port or [IPv6]:port` + "\n" +
				`wg0.conf:5: [Peer] has no PublicKey` + "\n" +
				`wg0.conf:7: unknown section [Bogus]; want [Interface], [Peer] or [WGPIO]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseString(tt.text)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, nil; want error %q", tt.text, f, tt.want)
			}
			if f != nil {
				t.Errorf("Parse(%q) returned a File with its error", tt.text)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Parse(%q) error =\n%s\nwant\n%s", tt.text, got, tt.want)
			}
			for _, e := range leafErrors(err) {
				var ce *Error
				if !errors.As(e, &ce) {
					t.Errorf("Parse(%q): error %v (%T) is not a *config.Error", tt.text, e, e)
				}
			}
		})
	}
}

// leafErrors flattens an errors.Join.
func leafErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestErrorFields(t *testing.T) {
	_, err := parseString(iface + "[Peer]\nPublicKey = " + pub2 + "\nEndpoint = nx.example.com:1\n")
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse error %v is not a *config.Error", err)
	}
	want := &Error{File: "wg0.conf", Line: 5, Key: "Endpoint", Msg: `resolve "nx.example.com": no such host`}
	if diff := cmp.Diff(want, ce, cmpopts.IgnoreFields(Error{}, "Err")); diff != "" {
		t.Errorf("Error mismatch (-want +got):\n%s", diff)
	}
	if ce.Unwrap() == nil || ce.Unwrap().Error() != "no such host" {
		t.Errorf("Unwrap() = %v, want the resolver's error", ce.Unwrap())
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.conf"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want os.ErrNotExist", err)
	}
}

// TestRoundTrip: Parse(Marshal(f)) equals f, for the sample files, a
// config that sets every field, and one whose peer has more allowed IPs
// than one line of MaxLine holds (written on several lines, which add up).
func TestRoundTrip(t *testing.T) {
	every := "[Interface]\nPrivateKey = " + priv1 + "\nListenPort = 1\nAddress = 10.0.0.1/24\nAddress = 2001:db8::9/128\nMTU = 1280\nDNS = 1.1.1.1\nPreDown = x\n" +
		"[WGPIO]\nMode = compat\nWAN = w0\nLAN = l0\nWANVLAN = 1\nLANVLAN = 4094\nAddressMode = owned\nQueues = 256\nCPUs = 5,0-3,9\nHandshakeWorkers = 3\nSourcePorts = 1-65535\n" +
		"WANAddress = 2001:db8::2/64\nLANAddress = 198.19.0.1/31\nGateway = fe80::1\nXDPMode = generic\nMetricsAddress = [::1]:9586\nMetricsPeers = off\n" +
		"MSSClamp = 1360\nICMPRate = off\nICMPBurst = 10\nICMPDestInterval = 250\nReplayWindow = 131008\n" +
		"[Peer]\nPublicKey = " + pub2 + "\nPresharedKey = " + psk + "\nAllowedIPs = 0.0.0.0/0, ::/0\nEndpoint = [2001:db8::1]:65535\nPersistentKeepalive = 65535\n" +
		"[Peer]\nPublicKey = " + pub3 + "\nEndpoint = host.example:7\n"
	var many strings.Builder
	many.WriteString("[Interface]\nPrivateKey = " + priv1 + "\n[Peer]\nPublicKey = " + pub2 + "\n")
	for i := range 8000 {
		if i%1000 == 0 {
			many.WriteString("\nAllowedIPs = ")
		} else {
			many.WriteString(", ")
		}
		fmt.Fprintf(&many, "10.%d.%d.0/24, fd00:%x::/32", byte(i>>8), byte(i), i)
	}
	many.WriteString("\n")
	inputs := map[string]string{"every field": every, "16,000 allowed IPs": many.String()}
	for _, name := range []string{"gateway.conf", "owned.conf", "client.conf"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		inputs[name] = string(b)
	}
	ignore := append([]cmp.Option{
		cmpopts.IgnoreFields(File{}, "Warnings"),
		cmpopts.IgnoreFields(Peer{}, "Line"),
		cmpopts.IgnoreFields(Setting{}, "Line"),
	}, fileCmp...)
	for name, text := range inputs {
		t.Run(name, func(t *testing.T) {
			f1, err := parseString(text)
			if err != nil {
				t.Fatalf("Parse = %v", err)
			}
			out := f1.Marshal()
			f2, err := parseString(string(out))
			if err != nil {
				t.Fatalf("Parse(Marshal(f)) = %v; Marshal:\n%s", err, out)
			}
			if diff := cmp.Diff(f1, f2, ignore...); diff != "" {
				t.Errorf("Parse(Marshal(f)) mismatch (-want +got):\n%s", diff)
			}
			if out2 := f2.Marshal(); string(out2) != string(out) {
				t.Errorf("Marshal not stable:\n%s\nthen\n%s", out, out2)
			}
			if _, err := parseString(string(f1.WG())); err != nil {
				t.Errorf("Parse(WG(f)) = %v", err)
			}
		})
	}
}

func TestMarshalGateway(t *testing.T) {
	f, err := testOpts.Load(filepath.Join("testdata", "gateway.conf"))
	if err != nil {
		t.Fatal(err)
	}
	want := "[Interface]\n" +
		"PrivateKey = " + priv1 + "\n" +
		"ListenPort = 51820\n" +
		"Address = 10.8.0.1/24, fd08::1/64\n" +
		"MTU = 1420\n" +
		"\n[WGPIO]\n" +
		"Mode = fastpath\nWAN = eth0\nLAN = eth1\nAddressMode = shared\nQueues = 2\nCPUs = 0-1\n" +
		"SourcePorts = 51820-51823\nXDPMode = auto\nMetricsAddress = 127.0.0.1:9586\n" +
		"\n[Peer]\n" +
		"PublicKey = " + pub2 + "\n" +
		"PresharedKey = " + psk + "\n" +
		"AllowedIPs = 10.8.0.2/32, 192.168.20.0/24, fd08::2/128\n" +
		"Endpoint = 203.0.113.20:51820\n" +
		"PersistentKeepalive = 25\n" +
		"\n[Peer]\n" +
		"PublicKey = " + pub3 + "\n" +
		"AllowedIPs = 10.8.0.3/32\n"
	if diff := cmp.Diff(want, string(f.Marshal())); diff != "" {
		t.Errorf("Marshal mismatch (-want +got):\n%s", diff)
	}
}

// TestSaveConfigFalseQuiet: SaveConfig = false asks for what wgpio does
// anyway (it never writes the file), so it is kept (Marshal writes it
// back) without a warning; SaveConfig = true still warns.
func TestSaveConfigFalseQuiet(t *testing.T) {
	f, err := parseString("[Interface]\nPrivateKey = " + priv1 + "\nSaveConfig = false\n")
	if err != nil {
		t.Fatalf("Parse = %v, want no error", err)
	}
	if len(f.Warnings) != 0 {
		t.Errorf("Warnings = %v, want none", f.Warnings)
	}
	want := []Setting{{Line: 3, Key: "SaveConfig", Value: "false"}}
	if diff := cmp.Diff(want, f.Interface.Unused); diff != "" {
		t.Errorf("Unused mismatch (-want +got):\n%s", diff)
	}
}
