package config

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/wgpio/wgpio/noise"
)

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"listenprt", "listenport", 1}, {"mtu", "mtu", 0},
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestKeyFileNameHint(t *testing.T) {
	for _, path := range []string{"/etc/wgpio/private.key", "/root/wgkey", "private.key"} {
		_, err := parseString("[Interface]\nPrivateKey = " + path + "\n")
		want := `wg0.conf:2: key "PrivateKey": not a base64 32-byte key (the key itself goes here, as ` + "`wg genkey`" + ` prints it, not the name of a file holding it)`
		if err == nil || err.Error() != want {
			t.Errorf("PrivateKey = %s: %v, want %q", path, err, want)
		}
	}
}

// TestKeyLengthHint: a key copied short or long (its '=' lost, a
// character more) is told a key's length and its own, not that it is a
// file name because base64 has '/' (priv1 has), and never echoed.
func TestKeyLengthHint(t *testing.T) {
	hint := func(n int) string {
		return fmt.Sprintf(" (a key is 44 characters of base64, the last one '=', as `wg genkey`, `wg pubkey` and `wg genpsk` print it; this one has %d: copy it whole)", n)
	}
	for _, tc := range []struct{ text, want string }{
		{"[Interface]\nPrivateKey = " + priv1[:43] + "\n", `wg0.conf:2: key "PrivateKey": not a base64 32-byte key` + hint(43)},
		{"[Interface]\nPrivateKey = " + priv1 + "A\n", `wg0.conf:2: key "PrivateKey": not a base64 32-byte key` + hint(45)},
		{iface + "[Peer]\nPublicKey = " + pub2[:42] + "\n", `wg0.conf:4: key "PublicKey": not a base64 32-byte key` + hint(42)},
	} {
		if !strings.Contains(priv1, "/") {
			t.Fatalf("priv1 %q has no '/': the test needs one", priv1)
		}
		_, err := parseString(tc.text)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), priv1[:20]) {
			t.Errorf("%q: the error %q holds the private key", tc.text, err)
		}
	}
}

// TestHiddenKeyHint: a key written as "(hidden)", copied from wg show or
// printed with a key's String (%s, %v) into a generated file, is named as
// such.
func TestHiddenKeyHint(t *testing.T) {
	priv, err := noise.ParsePrivateKey(priv1)
	if err != nil {
		t.Fatal(err)
	}
	var psk noise.PresharedKey
	for _, text := range []string{
		fmt.Sprintf("[Interface]\nPrivateKey = %s\n", priv),
		fmt.Sprintf("[Interface]\nPrivateKey = %s\n[Peer]\nPublicKey = %s\nPresharedKey = %v\n", priv1, pub2, psk),
	} {
		_, err := parseString(text)
		if err == nil || !strings.Contains(err.Error(), `not a base64 32-byte key ("(hidden)" is what wg show`) {
			t.Errorf("%q: %v, want the (hidden) hint", text, err)
		}
	}
}

// TestLoadDirectory: a directory given as the file is named as one, not
// reported as a read error at its line 1.
func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), dir+" is a directory") || strings.Contains(err.Error(), ":1:") {
		t.Errorf("Load(directory) = %v, want %q", err, dir+" is a directory")
	}
}

// TestCROnlyLineEnds: a file whose lines end in CR alone reads as one
// line; the error says so, rather than "malformed section header" and
// "no [Interface] section". A CRLF file, and a stray CR at a line's end,
// still parse.
func TestCROnlyLineEnds(t *testing.T) {
	_, err := parseString("[Interface]\rPrivateKey = " + priv1 + "\rListenPort = 51820\r")
	if err == nil || !strings.Contains(err.Error(), "wg0.conf:1: a carriage return (CR) inside the line") || strings.Contains(err.Error(), "no [Interface]") {
		t.Errorf("CR line ends: %v, want one error naming the carriage return", err)
	}
	_, err = parseString("[Interface]\nPrivateKey = " + priv1 + "\n[Peer]\rPublicKey = " + pub2 + "\n")
	if err == nil || !strings.Contains(err.Error(), "wg0.conf:3: a carriage return (CR) inside the line") {
		t.Errorf("CR inside line 3: %v, want it named", err)
	}
	for _, text := range []string{
		"[Interface]\r\nPrivateKey = " + priv1 + "\r\n",
		"[Interface]\r\r\nPrivateKey = " + priv1 + " \r\t\r\n",
	} {
		if _, err := parseString(text); err != nil {
			t.Errorf("parse(%q) = %v, want no error", text, err)
		}
	}
}

func TestByteOrderMarks(t *testing.T) {
	f, err := parseString("\ufeff[Interface]\nPrivateKey = " + priv1 + "\n")
	if err != nil || len(f.Warnings) != 1 || !strings.Contains(f.Warnings[0].String(), "byte-order mark") {
		t.Errorf("UTF-8 BOM: %v, warnings %v; want it skipped with a warning", err, f)
	}
	_, err = parseString("\xff\xfe[\x00I\x00")
	if err == nil || !strings.Contains(err.Error(), "wg0.conf:1: the file is UTF-16 text; save it as UTF-8") {
		t.Errorf("UTF-16: %v", err)
	}
}

func TestRiskyValues(t *testing.T) {
	owned := func(keys string) string {
		return "[Interface]\nPrivateKey = " + priv1 + "\n[WGPIO]\nAddressMode = owned\n" + keys
	}
	zero := "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	for _, tc := range []struct{ name, conf, want string }{
		{"zero private key", "[Interface]\nPrivateKey = " + zero + "\n", `wg0.conf:2: key "PrivateKey": all zero, which is no key`},
		{"zero public key", iface + "[Peer]\nPublicKey = " + zero + "\n", `wg0.conf:4: key "PublicKey": all zero, which is no peer's key`},
		{"unspecified endpoint", iface + "[Peer]\nPublicKey = " + pub2 + "\nEndpoint = 0.0.0.0:51820\n", `wg0.conf:5: key "Endpoint": 0.0.0.0 is not a unicast address`},
		{"broadcast endpoint", iface + "[Peer]\nPublicKey = " + pub2 + "\nEndpoint = 255.255.255.255:51820\n", `wg0.conf:5: key "Endpoint": 255.255.255.255 is not a unicast address`},
		{"multicast endpoint", iface + "[Peer]\nPublicKey = " + pub2 + "\nEndpoint = [ff02::1]:51820\n", `wg0.conf:5: key "Endpoint": ff02::1 is not a unicast address`},
		// Owned address mode answers ARP/NDP for WANAddress and
		// LANAddress and sends from them; the ARP responder refused a
		// multicast one only at start (no line), and took loopback.
		{"multicast WANAddress", owned("WANAddress = 224.0.0.1/24\nLANAddress = 198.19.0.1/24\n"), `wg0.conf:5: key "WANAddress": "224.0.0.1/24" is not a unicast address`},
		{"loopback LANAddress", owned("WANAddress = 198.18.0.2/24\nLANAddress = 127.0.0.1/8\n"), `wg0.conf:6: key "LANAddress": "127.0.0.1/8" is not a unicast address`},
		{"unspecified LANAddress", owned("WANAddress = 198.18.0.2/24\nLANAddress = ::/64\n"), `wg0.conf:6: key "LANAddress": "::/64" is not a unicast address`},
		{"mapped WANAddress", owned("WANAddress = ::ffff:198.18.0.2/120\nLANAddress = 198.19.0.1/24\n"), `wg0.conf:5: key "WANAddress": "::ffff:198.18.0.2/120" is not a unicast address`},
		{"broadcast Gateway", owned("WANAddress = 198.18.0.2/24\nLANAddress = 198.19.0.1/24\nGateway = 255.255.255.255\n"), `wg0.conf:7: key "Gateway": "255.255.255.255" is not a unicast address`},
		{"Gateway is WANAddress", owned("WANAddress = 198.18.0.2/24\nLANAddress = 198.19.0.1/24\nGateway = 198.18.0.2\n"), `wg0.conf:7: key "Gateway": 198.18.0.2 is WANAddress itself`},
	} {
		if _, err := parseString(tc.conf); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	f, err := parseString(iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 0.0.0.0/0\n[Peer]\nPublicKey = " + pub3 + "\nAllowedIPs = 0.0.0.0/0\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Warnings) != 1 || !strings.Contains(f.Warnings[0].String(), `wg0.conf:8: key "AllowedIPs": 0.0.0.0/0 is also in the [Peer] at line 3; this later peer takes it`) {
		t.Errorf("warnings %v, want one about 0.0.0.0/0 in two peers", f.Warnings)
	}
}

func TestRouterKeys(t *testing.T) {
	base := "[Interface]\nPrivateKey = " + priv1 + "\n[WGPIO]\n"
	tests := []struct {
		in   string
		want WGPIO
	}{
		{"MSSClamp = auto\n", WGPIO{MSSClamp: MSSClampAuto}},
		{"MSSClamp = OFF\n", WGPIO{MSSClamp: MSSClampOff}},
		{"MSSClamp = 1380\n", WGPIO{MSSClamp: 1380}},
		{"ICMPRate = 200\nICMPBurst = 5\nICMPDestInterval = off\n", WGPIO{ICMPRate: 200, ICMPBurst: 5, ICMPDestInterval: Off}},
		{"ICMPRate = off\nICMPDestInterval = 500\n", WGPIO{ICMPRate: Off, ICMPDestInterval: 500 * time.Millisecond}},
		{"ReplayWindow = Auto\n", WGPIO{ReplayWindow: ReplayWindowAuto}},
		{"ReplayWindow = 8128\n", WGPIO{ReplayWindow: ReplayWindowNarrow}},
		{"ReplayWindow = 131008\n", WGPIO{ReplayWindow: ReplayWindowWide}},
	}
	for _, tt := range tests {
		f, err := Parse("wg0.conf", strings.NewReader(base+tt.in))
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.in, err)
		}
		w := f.WGPIO
		if w.MSSClamp != tt.want.MSSClamp || w.ICMPRate != tt.want.ICMPRate || w.ICMPBurst != tt.want.ICMPBurst || w.ICMPDestInterval != tt.want.ICMPDestInterval || w.ReplayWindow != tt.want.ReplayWindow {
			t.Errorf("Parse(%q) = MSSClamp %d ICMPRate %d ICMPBurst %d ICMPDestInterval %v ReplayWindow %d, want %+v", tt.in, w.MSSClamp, w.ICMPRate, w.ICMPBurst, w.ICMPDestInterval, w.ReplayWindow, tt.want)
		}
		g, err := Parse("wg0.conf", bytes.NewReader(f.Marshal()))
		if err != nil || g.WGPIO.MSSClamp != f.WGPIO.MSSClamp || g.WGPIO.ICMPRate != f.WGPIO.ICMPRate || g.WGPIO.ICMPDestInterval != f.WGPIO.ICMPDestInterval || g.WGPIO.ReplayWindow != f.WGPIO.ReplayWindow {
			t.Errorf("round trip of %q: %+v, %v", tt.in, g.WGPIO, err)
		}
	}
}

// TestEndpointSkipsNonUnicast: a host name's answers that are no peer's
// address (0.0.0.0 from a DNS block list) are passed over for the first
// unicast one.
func TestEndpointSkipsNonUnicast(t *testing.T) {
	f, err := parseString(iface + "[Peer]\nPublicKey = " + pub2 + "\nEndpoint = mixed.example.com:51820\n")
	if err != nil {
		t.Fatalf("Parse = %v, want no error", err)
	}
	if got, want := f.Peers[0].Endpoint, netip.MustParseAddrPort("192.0.2.9:51820"); got != want {
		t.Errorf("Endpoint = %v, want %v (the first unicast answer)", got, want)
	}
}

// TestParseFwMark: FwMark takes what wg(8) takes (config.c parse_fwmark:
// "off", or strtoul base 0 up to 2^32-1) and is applied at start, as on a
// Linux wg0; anything else is an error at its line.
func TestParseFwMark(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want uint32
		err  bool
	}{
		{v: "off", want: 0}, {v: "OFF", want: 0}, {v: "0", want: 0},
		{v: "51820", want: 51820}, {v: "0x1234", want: 0x1234}, {v: "0XfF", want: 255},
		{v: "010", want: 8}, {v: "4294967295", want: 1<<32 - 1},
		{v: "4294967296", err: true}, {v: "-1", err: true}, {v: "0x", err: true},
		{v: "12ab", err: true}, {v: "1_000", err: true}, {v: "0b101", err: true}, {v: "0o17", err: true},
	} {
		t.Run(tt.v, func(t *testing.T) {
			f, err := parseString("[Interface]\nPrivateKey = " + priv1 + "\nFwMark = " + tt.v + "\n")
			if tt.err {
				want := `wg0.conf:3: key "FwMark": "` + tt.v + `" is not a mark; want off or a number up to 4294967295 (decimal, or hexadecimal with 0x)`
				if err == nil || err.Error() != want {
					t.Errorf("Parse(FwMark = %s) = %v, want %q", tt.v, err, want)
				}
				return
			}
			if err != nil || f.Interface.FwMark != tt.want {
				t.Fatalf("Parse(FwMark = %s) = %v, FwMark %d; want %d", tt.v, err, f.Interface.FwMark, tt.want)
			}
			if u := f.UAPI(); (tt.want != 0) != strings.Contains(u, fmt.Sprintf("\nfwmark=%d\n", tt.want)) {
				t.Errorf("UAPI() = %q, want a fwmark=%d line exactly when the mark is not 0", u, tt.want)
			}
		})
	}
}

// TestMTUBelowIPv6Minimum: an MTU below 1280 with IPv6 allowed IPs (no
// IPv6 Address, which is an error) is accepted with a warning at the MTU
// line naming the prefix and what becomes of IPv6 in the file's Mode (the
// fast path and compat mode carry none, as Linux's wg0: ipv6_off;
// compat-mqtun's kernel TUN stops up); with IPv4 allowed IPs alone, no
// warning.
func TestMTUBelowIPv6Minimum(t *testing.T) {
	iface := "[Interface]\nPrivateKey = " + priv1 + "\nMTU = 1200\n"
	f, err := parseString(iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 10.0.0.0/24\n[Peer]\nPublicKey = " + pub3 + "\nAllowedIPs = 0.0.0.0/0, ::/0\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Warnings) != 1 || !strings.HasPrefix(f.Warnings[0].String(), `wg0.conf:3: key "MTU": 1200 is below 1280, IPv6's minimum (RFC 8200 section 5), and a peer's AllowedIPs hold ::/0`) {
		t.Errorf("warnings %v, want one at the MTU about ::/0", f.Warnings)
	}
	for mode, want := range map[string]string{"": "drops ipv6_off", "fastpath": "drops ipv6_off", "compat": "drops ipv6_off", "compat-mqtun": "stops wgpio up"} {
		f, err := parseString(iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 2001:db8::/64\n[WGPIO]\nMode = " + mode + "\n")
		if mode == "" {
			f, err = parseString(iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 2001:db8::/64\n")
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Warnings) != 1 || !strings.Contains(f.Warnings[0].String(), want) || !strings.HasPrefix(f.Warnings[0].String(), `wg0.conf:3: key "MTU": 1200`) {
			t.Errorf("Mode %q: warnings %v, want one at the MTU saying %q", mode, f.Warnings, want)
		}
	}
	f, err = parseString(iface + "[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 10.0.0.0/24, 10.1.0.0/16\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Warnings) != 0 {
		t.Errorf("IPv4 allowed IPs only: warnings %v, want none", f.Warnings)
	}
}

// TestParseWarningsCapped: 50,000 peers without AllowedIPs give
// MaxWarningsPerKind warnings and one that counts the rest; another kind
// (host bits) is capped on its own.
func TestParseWarningsCapped(t *testing.T) {
	const peers, hostBits = 50000, 12
	var b strings.Builder
	b.WriteString("[Interface]\nPrivateKey = " + priv1 + "\n")
	key := make([]byte, 32)
	for i := range peers + hostBits {
		binary.BigEndian.PutUint32(key, uint32(i+1))
		b.WriteString("[Peer]\nPublicKey = " + base64.StdEncoding.EncodeToString(key) + "\n")
		if i >= peers {
			fmt.Fprintf(&b, "AllowedIPs = 10.%d.0.1/24\n", i-peers)
		}
	}
	f, err := parseString(b.String())
	if err != nil {
		t.Fatalf("Parse = %v, want no error", err)
	}
	var none, bits, summaries []Warning
	for _, w := range f.Warnings {
		switch {
		case w.More != 0:
			summaries = append(summaries, w)
		case strings.Contains(w.Msg, "no AllowedIPs"):
			none = append(none, w)
		case strings.Contains(w.Msg, "host bits"):
			bits = append(bits, w)
		}
	}
	if len(none) != MaxWarningsPerKind || len(bits) != MaxWarningsPerKind {
		t.Errorf("listed %d warnings of no AllowedIPs and %d of host bits, want %d each", len(none), len(bits), MaxWarningsPerKind)
	}
	if len(f.Warnings) != 2*MaxWarningsPerKind+2 {
		t.Errorf("len(Warnings) = %d, want %d", len(f.Warnings), 2*MaxWarningsPerKind+2)
	}
	want := []string{
		fmt.Sprintf("wg0.conf: %d more warnings of this kind, not listed (%d in all; the first %d are above, the first at line 3: [Peer] has no AllowedIPs; no traffic will pass to or from it)",
			peers-MaxWarningsPerKind, peers, MaxWarningsPerKind),
		fmt.Sprintf(`wg0.conf: key "AllowedIPs": %d more warnings of this kind, not listed (%d in all; the first %d are above, the first at line %d: 10.0.0.1/24 has host bits set; it means 10.0.0.0/24)`,
			hostBits-MaxWarningsPerKind, hostBits, MaxWarningsPerKind, 3+2*peers+2),
	}
	var got []string
	for _, w := range summaries {
		got = append(got, w.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summaries mismatch (-want +got):\n%s", diff)
	}
	if len(summaries) == 2 && (summaries[0].More != peers-MaxWarningsPerKind || summaries[1].More != hostBits-MaxWarningsPerKind) {
		t.Errorf("More = %d, %d, want %d, %d", summaries[0].More, summaries[1].More, peers-MaxWarningsPerKind, hostBits-MaxWarningsPerKind)
	}
	if summaries := f.Warnings[len(f.Warnings)-2:]; summaries[0].More == 0 || summaries[1].More == 0 {
		t.Errorf("the summaries are not last: %v", f.Warnings[len(f.Warnings)-2:])
	}
}

// TestListedTwice: an Address or a peer's AllowedIPs prefix listed twice
// is kept once, with a warning that names the second line (wg-quick's
// second `ip address add` of an Address fails).
func TestListedTwice(t *testing.T) {
	f, err := parseString("[Interface]\nPrivateKey = " + priv1 + "\nAddress = 10.8.0.1/24, 10.8.0.1/24\nAddress = fd00::1/64\nAddress = fd00::1/64\n" +
		"[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 10.9.0.0/24\nAllowedIPs = 10.9.0.0/24, 10.9.0.7/24\n")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(f.Interface.Addresses), "[10.8.0.1/24 fd00::1/64]"; got != want {
		t.Errorf("Addresses %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(f.Peers[0].AllowedIPs), "[10.9.0.0/24]"; got != want {
		t.Errorf("AllowedIPs %s, want %s", got, want)
	}
	var ws []string
	for _, w := range f.Warnings {
		ws = append(ws, w.String())
	}
	all := strings.Join(ws, "\n")
	for _, want := range []string{
		`wg0.conf:3: key "Address": 10.8.0.1/24 is listed twice`,
		`wg0.conf:5: key "Address": fd00::1/64 is listed twice`,
		`wg0.conf:9: key "AllowedIPs": 10.9.0.0/24 is listed twice for this peer`,
		`wg0.conf:9: key "AllowedIPs": 10.9.0.7/24 has host bits set`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings:\n%s\nwant one with %q", all, want)
		}
	}
}

// TestHookShellHint: a hook whose command needs bash (the common
// "iptables ...; iptables ..." PostUp) is told to run through
// /bin/bash -c, since systemd runs ExecStartPost= and the others without
// a shell, and a failing ExecStartPost= fails the unit's start; '$' and
// '%' (but %i, the instance's name) are told to be doubled for systemd.
// A plain command keeps the short advice. The command is kept as
// wg-quick hands it to bash, without the comment bash would drop: its ';'
// separates commands, and a '#' in quotes or inside a word is its own.
func TestHookShellHint(t *testing.T) {
	const dropIn = " in a drop-in of wgpio@.service (systemctl edit wgpio@NAME)"
	plain := "ignored: wgpio runs no commands (wg-quick runs them with bash); run it from "
	shell := "ignored: wgpio runs no commands (wg-quick runs them with bash) and systemd runs them without a shell, which this one needs; run it as "
	for _, tc := range []struct{ line, want string }{
		{`PostUp = logger "wg up on %i"`, plain + "ExecStartPost=" + dropIn},
		{`PreUp = tc qdisc add dev eth0 root cake bandwidth 90%`, plain + "ExecStartPre=" + dropIn + ", with each % but %i's written %%"},
		{"PostUp = iptables -A FORWARD -i %i -j ACCEPT; iptables -t nat -A POSTROUTING -o eth0 -j MASQUERADE",
			shell + "ExecStartPost=/bin/bash -c '<the command>'" + dropIn},
		{"PreDown = ip rule del from 10.8.0.0/24 table 200 || true", shell + "ExecStop=/bin/bash -c '<the command>'" + dropIn},
		{"PostDown = echo $(date) %i down >> /var/log/wg.log", shell + "ExecStopPost=/bin/bash -c '<the command>'" + dropIn + ", with each $ written $$"},
		{`PostUp = printf '%s\n' up > /run/x`, shell + "ExecStartPost=/bin/bash -c '<the command>'" + dropIn +
			", with each % but %i's written %% and its ' and \\ quoted as systemd.syntax(7) says (or put the command in a script and run that)"},
		// A '#' inside quotes, or inside a word, is the command's, as bash
		// reads it; only the trailing comment goes.
		{`PostUp = iptables -A FORWARD -m comment --comment "#wg" -j ACCEPT; echo ok`, shell + "ExecStartPost=/bin/bash -c '<the command>'" + dropIn},
		{`PostUp = logger up#%i`, plain + "ExecStartPost=" + dropIn},
		{`PostUp = logger up\ #1`, plain + "ExecStartPost=" + dropIn +
			", with its ' and \\ quoted as systemd.syntax(7) says (or put the command in a script and run that)"},
		// A variable's assignment and a builtin are bash's.
		{"PostUp = FOO=1 /usr/local/bin/up.sh", shell + "ExecStartPost=/bin/bash -c '<the command>'" + dropIn},
		{"PostUp = source /etc/wireguard/up.env", shell + "ExecStartPost=/bin/bash -c '<the command>'" + dropIn},
		{"PostUp = [[ -e /run/x ]] || touch /run/x", shell + "ExecStartPost=/bin/bash -c '<the command>'" + dropIn},
	} {
		f, err := parseString(iface + tc.line + " # as on the old wg0\n")
		if err != nil {
			t.Fatalf("%q: %v", tc.line, err)
		}
		if len(f.Warnings) != 1 {
			t.Fatalf("%q: warnings %v, want one", tc.line, f.Warnings)
		}
		key, cmd, _ := strings.Cut(tc.line, " = ")
		if got := f.Interface.Unused; len(got) != 1 || got[0].Value != cmd {
			t.Errorf("%q: Unused = %v, want the command %q", tc.line, got, cmd)
		}
		want := `wg0.conf:3: key "` + key + `": ` + tc.want
		if got := f.Warnings[0].String(); got != want {
			t.Errorf("%q:\n got %s\nwant %s", tc.line, got, want)
		}
	}
}

// TestHookEmpty: an empty hook (wg-quick runs nothing for it) is kept and
// warned of without advice to move a command that is not there.
func TestHookEmpty(t *testing.T) {
	f, err := parseString(iface + "PostUp =   # nothing yet\n")
	if err != nil {
		t.Fatal(err)
	}
	want := `wg0.conf:3: key "PostUp": ignored: wgpio runs no commands, and this one is empty (wg-quick runs nothing for it): nothing to move`
	if len(f.Warnings) != 1 || f.Warnings[0].String() != want {
		t.Errorf("warnings %v, want %s", f.Warnings, want)
	}
	if got := f.Interface.Unused; len(got) != 1 || got[0].Value != "" {
		t.Errorf("Unused = %v, want the empty PostUp", got)
	}
}
