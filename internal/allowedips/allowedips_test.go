package allowedips

import (
	"crypto/ecdh"
	"encoding/hex"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"golang.zx2c4.com/wireguard/device"
)

// key is test peer i's public key.
func key(i byte) device.NoisePublicKey {
	var k device.NoisePublicKey
	k[0], k[31] = i, 0x40
	return k
}

func hexKey(i byte) string {
	k := key(i)
	return hex.EncodeToString(k[:])
}

// TestEditPieces: a set written in pieces of every size gives the ops of
// the whole, up to its blank line; device keys other than listen_port and
// fwmark, bad prefixes and bad keys mark it unfollowed.
func TestEditPieces(t *testing.T) {
	body := "listen_port=1\npublic_key=" + hexKey(1) + "\nendpoint=198.18.0.2:1\nallowed_ip=198.19.7.1/24\nallowed_ip=-2001:db8::1/32\n" +
		"replace_allowed_ips=true\nupdate_only=true\nremove=true\n\npublic_key=" + hexKey(2) + "\n"
	want := []Op{{Kind: OpPublicKey, Peer: key(1)}, {Kind: OpAllowedIP, Prefix: netip.MustParsePrefix("198.19.7.0/24")},
		{Kind: OpAllowedIP, Prefix: netip.MustParsePrefix("2001:db8::/32"), Del: true},
		{Kind: OpReplaceAllowedIPs}, {Kind: OpUpdateOnly}, {Kind: OpRemove}}
	for size := 1; size <= len(body); size++ {
		var e Edit
		for s := body; len(s) > 0; {
			n := min(size, len(s))
			e.Write([]byte(s[:n]))
			s = s[n:]
		}
		if e.Unfollowed || !slices.Equal(e.Ops, want) {
			t.Fatalf("written %d bytes at a time: ops %v (unfollowed %v), want %v", size, e.Ops, e.Unfollowed, want)
		}
	}
	for _, body := range []string{
		"private_key=00\n", "replace_peers=true\n", "public_key=zz\n",
		"public_key=" + hexKey(1) + "\nallowed_ip=nonsense\n",
		"public_key=" + hexKey(1) + "\nallowed_ip=" + strings.Repeat("1", maxEditLine) + "\n",
	} {
		var e Edit
		io.WriteString(&e, body)
		if !e.Unfollowed {
			t.Errorf("set %.60q: followed, want unfollowed", body)
		}
	}
}

// TestGetWriterPieces: the peers of a get reply written in pieces of
// every size are those of the whole reply, and so are the peers with an
// endpoint; a bad allowed_ip is reported.
func TestGetWriterPieces(t *testing.T) {
	reply := "private_key=00\nlisten_port=1\npublic_key=" + hexKey(1) + "\nallowed_ip=198.19.7.1/24\nendpoint=198.18.0.2:1\nallowed_ip=2001:db8::/32\n" +
		"public_key=" + hexKey(2) + "\npublic_key=" + hexKey(3) + "\nallowed_ip=10.0.0.0/8\nallowed_ip=10.1.2.3/32"
	want := map[netip.Prefix]device.NoisePublicKey{netip.MustParsePrefix("10.0.0.0/8"): key(3), netip.MustParsePrefix("10.1.2.3/32"): key(3),
		netip.MustParsePrefix("198.19.7.0/24"): key(1), netip.MustParsePrefix("2001:db8::/32"): key(1)}
	for size := 1; size <= len(reply); size++ {
		var w GetWriter
		for s := reply; len(s) > 0; {
			n := min(size, len(s))
			w.Write([]byte(s[:n]))
			s = s[n:]
		}
		m, err := w.Result()
		if err != nil || !maps.Equal(m.Owners(), want) || m.NumPeers() != 3 {
			t.Fatalf("written %d bytes at a time: %v, %d peers, %v; want %v, 3 peers", size, m.Owners(), m.NumPeers(), err, want)
		}
		if !w.HasEndpoint(key(1)) || w.HasEndpoint(key(2)) || w.HasEndpoint(key(3)) {
			t.Fatalf("written %d bytes at a time: HasEndpoint of peers 1, 2, 3 = %v %v %v, want true false false", size, w.HasEndpoint(key(1)), w.HasEndpoint(key(2)), w.HasEndpoint(key(3)))
		}
	}
	var w GetWriter
	io.WriteString(&w, "public_key="+hexKey(1)+"\nallowed_ip=bogus\n")
	if _, err := w.Result(); err == nil {
		t.Error("a bad allowed_ip was read without an error")
	}
}

// TestFollow: Follow's difference and model for sets that add, move,
// take and replace allowed IPs and create and remove peers, against
// wireguard-go's rules (device/uapi.go).
func TestFollow(t *testing.T) {
	p := netip.MustParsePrefix
	m := NewPeers(0)
	m.Allow(key(1), p("10.1.0.0/16"))
	m.Allow(key(2), p("10.2.0.0/16"))
	all := func(k device.NoisePublicKey) bool { _, ok := m.Peer(k); return ok }
	for _, step := range []struct {
		what     string
		ops      []Op
		add, del []netip.Prefix
		owners   map[netip.Prefix]device.NoisePublicKey
	}{
		{"move from peer 1 to peer 2: no difference",
			[]Op{{Kind: OpPublicKey, Peer: key(2)}, {Kind: OpAllowedIP, Prefix: p("10.1.0.0/16")}}, nil, nil,
			map[netip.Prefix]device.NoisePublicKey{p("10.1.0.0/16"): key(2), p("10.2.0.0/16"): key(2)}},
		{"take one peer 1 no longer has: nothing",
			[]Op{{Kind: OpPublicKey, Peer: key(1)}, {Kind: OpAllowedIP, Prefix: p("10.1.0.0/16"), Del: true}}, nil, nil,
			map[netip.Prefix]device.NoisePublicKey{p("10.1.0.0/16"): key(2), p("10.2.0.0/16"): key(2)}},
		{"replace peer 2's, adding one back",
			[]Op{{Kind: OpPublicKey, Peer: key(2)}, {Kind: OpReplaceAllowedIPs}, {Kind: OpAllowedIP, Prefix: p("10.2.0.0/16")}, {Kind: OpAllowedIP, Prefix: p("2001:db8::/32")}},
			[]netip.Prefix{p("2001:db8::/32")}, []netip.Prefix{p("10.1.0.0/16")},
			map[netip.Prefix]device.NoisePublicKey{p("2001:db8::/32"): key(2), p("10.2.0.0/16"): key(2)}},
		{"a new peer with update_only: ignored",
			[]Op{{Kind: OpPublicKey, Peer: key(3)}, {Kind: OpUpdateOnly}, {Kind: OpAllowedIP, Prefix: p("10.3.0.0/16")}}, nil, nil,
			map[netip.Prefix]device.NoisePublicKey{p("2001:db8::/32"): key(2), p("10.2.0.0/16"): key(2)}},
		{"peer 2 removed",
			[]Op{{Kind: OpPublicKey, Peer: key(2)}, {Kind: OpRemove}, {Kind: OpAllowedIP, Prefix: p("10.9.0.0/16")}}, nil,
			[]netip.Prefix{p("10.2.0.0/16"), p("2001:db8::/32")}, map[netip.Prefix]device.NoisePublicKey{}},
	} {
		add, del, ok := m.Follow(step.ops, all)
		sort := func(ps []netip.Prefix) []netip.Prefix {
			return slices.SortedFunc(slices.Values(ps), func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
		}
		if !ok || !slices.Equal(sort(add), step.add) || !slices.Equal(sort(del), step.del) || !maps.Equal(m.Owners(), step.owners) {
			t.Errorf("%s: Follow = %v, %v, %v, owners %v; want %v, %v, true, %v", step.what, add, del, ok, m.Owners(), step.add, step.del, step.owners)
		}
	}
	if _, _, ok := m.Follow([]Op{{Kind: OpPublicKey, Peer: key(9)}}, func(device.NoisePublicKey) bool { return false }); ok {
		t.Error("Follow of a peer the device does not have = true, want false")
	}
}

// FuzzEdit: no set body makes Edit panic, or keep more than a line.
// Seeds: a peer with allowed IPs, a removal, a device key.
func FuzzEdit(f *testing.F) {
	f.Add("public_key=" + hexKey(1) + "\nallowed_ip=10.0.0.0/8\nallowed_ip=-::/0\n")
	f.Add("public_key=" + hexKey(1) + "\nremove=true\n\n")
	f.Add("private_key=00\n")
	f.Fuzz(func(t *testing.T, body string) {
		var e Edit
		io.WriteString(&e, body)
		if len(e.line) > maxEditLine {
			t.Fatalf("Edit keeps a line of %d bytes", len(e.line))
		}
		var w GetWriter
		io.WriteString(&w, body)
		w.Result()
	})
}

// TestPrivateKey: a private_key line removes the peer of its public key,
// as wireguard-go's SetPrivateKey does when the key changes.
func TestPrivateKey(t *testing.T) {
	var sk device.NoisePrivateKey
	sk[0] = 7
	k, err := ecdh.X25519().NewPrivateKey(sk[:])
	if err != nil {
		t.Fatal(err)
	}
	pub := device.NoisePublicKey(k.PublicKey().Bytes())
	var e Edit
	io.WriteString(&e, "private_key="+hex.EncodeToString(sk[:])+"\nlisten_port=9\npublic_key="+hexKey(1)+"\nallowed_ip=10.1.0.0/16\n")
	if e.Unfollowed || len(e.Ops) != 3 || e.Ops[0] != (Op{Kind: OpPrivateKey, Peer: pub}) {
		t.Fatalf("ops %v (unfollowed %v), want the private key's public key %x first", e.Ops, e.Unfollowed, pub[:4])
	}
	m := NewPeers(0)
	m.Allow(pub, netip.MustParsePrefix("10.7.0.0/16"))
	add, del, ok := m.Follow(e.Ops, func(k device.NoisePublicKey) bool { return k == key(1) })
	if !ok || !slices.Equal(add, []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}) || !slices.Equal(del, []netip.Prefix{netip.MustParsePrefix("10.7.0.0/16")}) {
		t.Errorf("Follow = %v, %v, %v; want [10.1.0.0/16], [10.7.0.0/16], true", add, del, ok)
	}
	if _, ok := m.Peer(pub); ok {
		t.Error("the peer of the private key's public key is still in the model")
	}
}
