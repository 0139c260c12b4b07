//go:build linux

package main

import (
	"bytes"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/config"
)

// TestWarnForwarding: a fast-path gateway with an exception TUN warns at
// start, naming the sysctl, for each family its peers' allowed IPs use
// whose forwarding is off (the kernel forwards the decrypted traffic whose
// route leads off the LAN, and the LAN's traffic to a removed peer's
// prefixes into the TUN), and says nothing when it is on or when no peer
// uses the family.
func TestWarnForwarding(t *testing.T) {
	dir := t.TempDir()
	old := procSys
	procSys = dir + "/"
	t.Cleanup(func() { procSys = old })
	set := func(key, v string) {
		p := filepath.Join(dir, strings.ReplaceAll(key, ".", "/"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := &config.File{Name: "wg0.conf", Peers: []config.Peer{{AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.18.100.2/32")}}}}
	warn := func() string {
		var logs bytes.Buffer
		warnForwarding(slog.New(slog.NewTextHandler(&logs, nil)), f, "wg0")
		return logs.String()
	}
	set("net.ipv4.ip_forward", "0")
	set("net.ipv6.conf.all.forwarding", "0")
	if got := warn(); !strings.Contains(got, "sysctl -w net.ipv4.ip_forward=1") || strings.Contains(got, "ipv6") {
		t.Errorf("IPv4 peers, forwarding off: logged %q, want a warning naming net.ipv4.ip_forward only", got)
	}
	// The kernel forwards into the TUN what the LAN sends to a removed
	// peer's allowed IPs too (README, "Changing the listen port and the WAN
	// address live"): with forwarding off it drops that itself, uncounted
	// by the gateway and unanswered, which the warning said nothing of.
	if got := warn(); !strings.Contains(got, "removed peer's allowed IPs") || !strings.Contains(got, "no_route") {
		t.Errorf("IPv4 peers, forwarding off: logged %q, want it to say that a removed peer's prefixes are not counted as no_route", got)
	}
	set("net.ipv4.ip_forward", "1")
	if got := warn(); got != "" {
		t.Errorf("IPv4 peers, IPv4 forwarding on: logged %q, want nothing", got)
	}
	f.Peers = append(f.Peers, config.Peer{AllowedIPs: []netip.Prefix{netip.MustParsePrefix("::/0")}})
	if got := warn(); !strings.Contains(got, "sysctl -w net.ipv6.conf.all.forwarding=1") {
		t.Errorf("an IPv6 peer, IPv6 forwarding off: logged %q, want a warning naming net.ipv6.conf.all.forwarding", got)
	}
}
