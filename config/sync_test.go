package config

import (
	"crypto/sha256"
	"encoding/base64"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.zx2c4.com/wireguard/device"

	"github.com/wgpio/wgpio/internal/allowedips"
)

// syncKey is the base64 public key of test peer name (any 32 bytes are a
// key to UAPI).
func syncKey(name string) string {
	h := sha256.Sum256([]byte(name))
	return base64.StdEncoding.EncodeToString(h[:])
}

// syncFile is a file of the given peers, each "name:prefix,prefix" (no
// prefix after the colon: none).
func syncFile(t *testing.T, peers ...string) *File {
	t.Helper()
	var b strings.Builder
	b.WriteString("[Interface]\nPrivateKey = " + priv1 + "\nListenPort = 51820\n")
	for _, p := range peers {
		name, allowed, _ := strings.Cut(p, ":")
		b.WriteString("[Peer]\nPublicKey = " + syncKey(name) + "\n")
		if allowed != "" {
			b.WriteString("AllowedIPs = " + allowed + "\n")
		}
	}
	f, err := parseString(b.String())
	if err != nil {
		t.Fatalf("parse %q: %v", b.String(), err)
	}
	return f
}

// owned is the allowed IPs of a model, as prefix → hex public key.
func owned(m *allowedips.Peers) map[netip.Prefix]string {
	out := map[netip.Prefix]string{}
	for p, k := range m.Owners() {
		out[p] = hex32(k)
	}
	return out
}

func hex32(k device.NoisePublicKey) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 64)
	for i, c := range k {
		b[2*i], b[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(b)
}

// TestSyncUAPIKeepsRoutes: the operation SyncUAPI writes to take a running
// device from one file to the next leaves no allowed IP that both files
// route without a peer at any line, and an allowed IP that keeps its peer
// with that peer at every line, applied line by line as wireguard-go
// applies it (modelled by internal/allowedips, checked after each line);
// and a stock wireguard-go device that applies it whole ends with the
// allowed IPs of the second file. Before, a kept peer got
// replace_allowed_ips and its whole list: between the two lines its
// allowed IPs had no peer, and wireguard-go dropped, uncounted, what the
// LAN sent to them (a reload storm in Mode = compat lost traffic of peers
// whose lines had not changed).
func TestSyncUAPIKeepsRoutes(t *testing.T) {
	tests := []struct {
		name     string
		from, to []string
	}{
		{"unchanged", []string{"a:10.0.1.0/24,10.0.9.0/24", "b:10.0.2.0/24"}, []string{"a:10.0.1.0/24,10.0.9.0/24", "b:10.0.2.0/24"}},
		{"moved to a later peer", []string{"a:10.0.1.0/24,10.0.9.0/24", "b:10.0.2.0/24"}, []string{"a:10.0.1.0/24", "b:10.0.2.0/24,10.0.9.0/24"}},
		{"moved to an earlier peer", []string{"a:10.0.1.0/24", "b:10.0.2.0/24,10.0.9.0/24"}, []string{"a:10.0.1.0/24,10.0.9.0/24", "b:10.0.2.0/24"}},
		{"removed and added", []string{"a:10.0.1.0/24,10.0.9.0/24", "b:10.0.2.0/24"}, []string{"a:10.0.1.0/24,10.0.7.0/24", "b:10.0.2.0/24,fd00::/64"}},
		{"to a new peer", []string{"a:10.0.1.0/24,10.0.9.0/24"}, []string{"a:10.0.1.0/24", "c:10.0.9.0/24"}},
		{"from a removed peer", []string{"a:10.0.1.0/24", "b:10.0.2.0/24,10.0.9.0/24"}, []string{"a:10.0.1.0/24,10.0.9.0/24"}},
		{"listed twice, held by the first", []string{"a:10.0.1.0/24,10.0.9.0/24", "b:10.0.2.0/24"}, []string{"a:10.0.1.0/24,10.0.9.0/24", "b:10.0.2.0/24,10.0.9.0/24"}},
		{"listed twice, held by the second", []string{"a:10.0.1.0/24", "b:10.0.2.0/24,10.0.9.0/24"}, []string{"a:10.0.1.0/24,10.0.9.0/24", "b:10.0.2.0/24,10.0.9.0/24"}},
		{"peer emptied", []string{"a:10.0.1.0/24,10.0.9.0/24", "b:10.0.2.0/24"}, []string{"a:", "b:10.0.2.0/24"}},
		{"listed twice, first new, held by the second", []string{"b:10.0.9.0/24"}, []string{"c:10.0.9.0/24", "b:10.0.9.0/24"}},
		{"listed twice, both new", []string{"a:10.0.1.0/24"}, []string{"c:10.0.9.0/24,10.0.1.0/24", "d:10.0.9.0/24", "a:10.0.2.0/24"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from, to := syncFile(t, tt.from...), syncFile(t, tt.to...)
			dev := newDevice(t)
			if err := dev.IpcSet(from.UAPI()); err != nil {
				t.Fatalf("IpcSet(from) = %v", err)
			}
			get, err := dev.IpcGet()
			if err != nil {
				t.Fatal(err)
			}
			running := RunningPeers(get)
			body := to.SyncUAPI(running)

			start := func() *allowedips.Peers {
				m := allowedips.NewPeers(0)
				for _, r := range running {
					var k device.NoisePublicKey
					if err := k.FromHex(r.PublicKey); err != nil {
						t.Fatal(err)
					}
					m.AddPeer(k)
					for _, p := range r.AllowedIPs {
						m.Allow(k, p)
					}
				}
				return m
			}
			before := owned(start())
			want := map[netip.Prefix]string{}
			for p, peer := range to.owners() {
				want[p] = peer.PublicKey.Hex()
			}
			var e allowedips.Edit
			e.Write([]byte(body + "\n"))
			if e.Unfollowed {
				t.Fatalf("the model cannot follow the body:\n%s", body)
			}
			for n := 1; n <= len(e.Ops); n++ {
				m := start()
				m.Follow(e.Ops[:n], func(device.NoisePublicKey) bool { return true })
				now := owned(m)
				for p, was := range before {
					w, stays := want[p]
					if !stays {
						continue
					}
					if _, ok := now[p]; !ok {
						t.Errorf("after op %d of the body, %v has no peer (before: %.8s…, after: %.8s…)\nbody:\n%s", n, p, was, w, body)
					} else if was == w && now[p] != w {
						t.Errorf("after op %d of the body, %v is with %.8s…, not with its peer %.8s… of both files\nbody:\n%s", n, p, now[p], w, body)
					}
				}
			}

			if err := dev.IpcSet(body); err != nil {
				t.Fatalf("IpcSet(SyncUAPI) = %v\nbody:\n%s", err, body)
			}
			_, _, peers := ipcState(t, dev)
			got := map[netip.Prefix]string{}
			for k, p := range peers {
				for _, a := range p.AllowedIPs {
					got[netip.MustParsePrefix(a)] = k
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("allowed IPs after the sync (-want +got):\n%s\nbody:\n%s", diff, body)
			}
			wantPeers := make([]string, len(to.Peers))
			for i := range to.Peers {
				wantPeers[i] = to.Peers[i].PublicKey.Hex()
			}
			if gotPeers := slices.Sorted(maps.Keys(peers)); !slices.Equal(gotPeers, slices.Sorted(slices.Values(wantPeers))) {
				t.Errorf("peers after the sync = %v, want %v", gotPeers, wantPeers)
			}
		})
	}
}

// TestRunningPeers: RunningPeers reads each peer's key and allowed IPs,
// masked, from a get=1 reply, and skips what it cannot parse.
func TestRunningPeers(t *testing.T) {
	get := "private_key=00\nlisten_port=51820\n" +
		"public_key=aa\nendpoint=198.18.0.1:51820\nallowed_ip=10.0.0.1/24\nallowed_ip=fd00::/64\n" +
		"public_key=bb\nallowed_ip=bogus\n" +
		"public_key=cc\nallowed_ip=10.0.2.0/24\nerrno=0\n"
	want := []RunningPeer{
		{PublicKey: "aa", AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("fd00::/64")}},
		{PublicKey: "bb"},
		{PublicKey: "cc", AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.0.2.0/24")}},
	}
	if diff := cmp.Diff(want, RunningPeers(get), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("RunningPeers mismatch (-want +got):\n%s", diff)
	}
}
