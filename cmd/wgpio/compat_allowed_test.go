//go:build linux

package main

import (
	"crypto/ecdh"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.zx2c4.com/wireguard/conn/bindtest"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"

	"github.com/wgpio/wgpio/internal/allowedips"
)

// testAllowed returns an mqtunAllowed on a wireguard-go device (down, on
// channel TUN and bind) with n peers, peer i allowing peerPrefix(i).
func testAllowed(tb testing.TB, n int) *mqtunAllowed {
	tb.Helper()
	binds := bindtest.NewChannelBinds()
	dev := device.NewDevice(tuntest.NewChannelTUN().TUN(), binds[0], device.NewLogger(device.LogLevelSilent, ""))
	tb.Cleanup(dev.Close)
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "public_key=%s\nallowed_ip=%s\n", peerKey(i), peerPrefix(i))
	}
	if err := dev.IpcSet(b.String()); err != nil {
		tb.Fatal(err)
	}
	a := &mqtunAllowed{dev: dev, tun: &mapTable{}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := a.sync(); err != nil {
		tb.Fatal(err)
	}
	return a
}

// mapTable is an allowedTable in a map (nil: off), for tests to compare
// with the model. Not safe for concurrent use: mqtunAllowed calls it
// with its mutex held.
type mapTable struct{ m map[netip.Prefix]struct{} }

func (t *mapTable) SetAllowed(allowed []netip.Prefix) {
	if allowed == nil {
		t.m = nil
		return
	}
	t.m = make(map[netip.Prefix]struct{})
	for _, p := range allowed {
		t.m[p.Masked()] = struct{}{}
	}
}

func (t *mapTable) UpdateAllowed(add, del []netip.Prefix) {
	if t.m == nil {
		return
	}
	for _, p := range del {
		delete(t.m, p.Masked())
	}
	for _, p := range add {
		t.m[p.Masked()] = struct{}{}
	}
}

// checkTable fails t unless a's table holds exactly the model's prefixes.
func checkTable(t *testing.T, name string, a *mqtunAllowed) {
	t.Helper()
	m := a.tun.(*mapTable).m
	if len(m) != len(a.model.Owners()) {
		t.Errorf("%s: the table holds %d prefixes, the model %d", name, len(m), len(a.model.Owners()))
	}
	for p := range a.model.Owners() {
		if _, ok := m[p]; !ok {
			t.Errorf("%s: %v allowed but not in the table", name, p)
		}
	}
}

// peerKey is test peer i's public key, in hex.
func peerKey(i int) string {
	var k [32]byte
	k[0], k[1], k[2], k[31] = byte(i), byte(i>>8), byte(i>>16), 0x40
	return hex.EncodeToString(k[:])
}

// peerPrefix is test peer i's allowed IP: a /32 in 10.0.0.0/8.
func peerPrefix(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
}

// BenchmarkAllowedSet measures one `wg set` (a peer's allowed IP moved)
// on a device with 1,000 and 10,000 peers: stock wireguard-go's cost
// does not grow with the peers, so neither may the sync's.
func BenchmarkAllowedSet(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			a := testAllowed(b, n)
			i := 0
			for b.Loop() {
				i++
				body := fmt.Sprintf("public_key=%s\nreplace_allowed_ips=true\nallowed_ip=%s\n", peerKey(0), peerPrefix(n+i%2))
				if err := a.set(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestAllowedSetFollows: sets that add, move, remove and replace allowed
// IPs, create, remove and update_only peers, leave the model equal to
// wireguard-go's configuration (UAPI get) without reading it whole, a
// set of the private key too; a set that fails halfway and one naming
// the device's own public key are followed by a whole read that agrees
// too.
// (Before sets were followed, every set read the whole configuration.)
func TestAllowedSetFollows(t *testing.T) {
	a := testAllowed(t, 8)
	p := func(s string) netip.Prefix { return netip.MustParsePrefix(s) }
	check := func(name string, wantSyncs int) {
		t.Helper()
		conf, err := a.dev.IpcGet()
		if err != nil {
			t.Fatal(err)
		}
		want, err := parsePeers(conf)
		if err != nil {
			t.Fatal(err)
		}
		got := make(map[netip.Prefix]device.NoisePublicKey)
		for k, ps := range want {
			if _, ok := a.model.Peer(k); !ok {
				t.Errorf("%s: peer %x missing from the model", name, k[:4])
			}
			for p := range ps {
				got[p] = k
			}
		}
		if a.model.NumPeers() != len(want) || !maps.Equal(got, a.model.Owners()) {
			t.Errorf("%s: model %v, %d peers; wireguard-go %v, %d peers", name, a.model.Owners(), a.model.NumPeers(), got, len(want))
		}
		checkTable(t, name, a)
		if a.syncs != wantSyncs {
			t.Errorf("%s: %d syncs, want %d", name, a.syncs, wantSyncs)
		}
	}
	for i, body := range []string{
		"public_key=" + peerKey(0) + "\nallowed_ip=" + peerPrefix(1).String() + "\nallowed_ip=198.19.0.9/16\n",
		"public_key=" + peerKey(1) + "\nreplace_allowed_ips=true\nallowed_ip=2001:db8::/32\nallowed_ip=-" + peerPrefix(2).String() + "\n",
		"public_key=" + peerKey(2) + "\nallowed_ip=-" + peerPrefix(2).String() + "\n",
		"public_key=" + peerKey(3) + "\nremove=true\npublic_key=" + peerKey(4) + "\nallowed_ip=" + peerPrefix(3).String() + "\n",
		"public_key=" + peerKey(100) + "\nupdate_only=true\nallowed_ip=" + peerPrefix(5).String() + "\n",
		"public_key=" + peerKey(101) + "\nallowed_ip=" + peerPrefix(5).String() + "\nupdate_only=true\n",
		"listen_port=0\npublic_key=" + peerKey(102) + "\nallowed_ip=" + peerPrefix(6).String() + "\nremove=true\npublic_key=" + peerKey(102) + "\nallowed_ip=198.18.3.0/24\n",
		"public_key=" + peerKey(5) + "\nupdate_only=true\nallowed_ip=" + peerPrefix(7).String() + "\n\npublic_key=" + peerKey(6) + "\nremove=true\n",
	} {
		if err := a.set(body); err != nil {
			t.Fatalf("set %d: %v", i, err)
		}
		check(fmt.Sprintf("set %d", i), 1)
	}
	if _, ok := a.model.Owners()[p("198.19.0.0/16")]; !ok {
		t.Fatal("198.19.0.9/16 not followed masked")
	}
	// Fails at its second peer, after the first took a prefix.
	if err := a.set("public_key=" + peerKey(7) + "\nallowed_ip=198.18.200.0/24\npublic_key=" + peerKey(1) + "\nallowed_ip=bogus\n"); err == nil {
		t.Fatal("a bad allowed_ip was taken")
	}
	check("failed set", 2)
	var sk device.NoisePrivateKey
	sk[0] = 1
	self := hex.EncodeToString(publicKey(sk))
	if err := a.set("private_key=" + hex.EncodeToString(sk[:]) + "\n"); err != nil {
		t.Fatal(err)
	}
	check("private_key", 2)
	if err := a.set("public_key=" + self + "\nallowed_ip=" + peerPrefix(0).String() + "\n"); err != nil {
		t.Fatal(err)
	}
	check("own public key", 3)
}

// publicKey is the X25519 public key of sk.
func publicKey(sk device.NoisePrivateKey) []byte {
	k, err := ecdh.X25519().NewPrivateKey(sk[:])
	if err != nil {
		panic(err)
	}
	return k.PublicKey().Bytes()
}

// TestAllowedSetConcurrent: sets from several UAPI clients at once, each
// moving, adding, removing allowed IPs and peers, leave the model equal
// to wireguard-go's allowed IPs (the updates reach the TUN in the order
// wireguard-go applied the sets) without a whole read.
func TestAllowedSetConcurrent(t *testing.T) {
	a := testAllowed(t, 16)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 200 {
				k := peerKey(r.IntN(20))
				var body string
				switch r.IntN(5) {
				case 0:
					body = "public_key=" + k + "\nremove=true\n"
				case 1:
					body = "public_key=" + k + "\nreplace_allowed_ips=true\nallowed_ip=" + peerPrefix(r.IntN(40)).String() + "\n"
				case 2:
					body = "public_key=" + k + "\nallowed_ip=-" + peerPrefix(r.IntN(40)).String() + "\n"
				default:
					body = "public_key=" + k + "\nallowed_ip=" + peerPrefix(r.IntN(40)).String() + "\n"
				}
				if err := a.set(body); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	conf, err := a.dev.IpcGet()
	if err != nil {
		t.Fatal(err)
	}
	want, err := parsePeers(conf)
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	checkTable(t, "after", a)
	n := 0
	for k, ps := range want {
		n += len(ps)
		if mp, _ := a.model.Peer(k); !maps.Equal(ps, mp) {
			t.Errorf("peer %x: model %v, wireguard-go %v", k[:4], mp, ps)
		}
	}
	if a.model.NumPeers() != len(want) || len(a.model.Owners()) != n || a.syncs != 1 {
		t.Errorf("model: %d peers, %d prefixes, %d syncs; wireguard-go: %d peers, %d prefixes; want 1 sync", a.model.NumPeers(), len(a.model.Owners()), a.syncs, len(want), n)
	}
}

// parsePeers returns the peers of UAPI get reply conf, each with its
// allowed IPs (masked), read by allowedips.GetWriter.
func parsePeers(conf string) (map[device.NoisePublicKey]map[netip.Prefix]struct{}, error) {
	var w allowedips.GetWriter
	io.WriteString(&w, conf)
	m, err := w.Result()
	if err != nil {
		return nil, err
	}
	out := make(map[device.NoisePublicKey]map[netip.Prefix]struct{})
	for k, ps := range m.All() {
		out[k] = maps.Clone(ps)
	}
	return out, nil
}
