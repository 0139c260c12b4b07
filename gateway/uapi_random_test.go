package gateway

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wgpio/wgpio/noise"
)

// TestUAPIRandomMatchesWireguardGo applies random "set=1" requests, over a
// few peers (our own key among them) and overlapping prefixes (/0s
// included), with every peer and device key (replace_peers, update_only,
// remove, replace_allowed_ips, allowed_ip with and without '-', invalid
// lines that stop a request half-way), to our Device and to stock
// wireguard-go, and compares each errno and the get=1 output after each,
// each peer's allowed IPs in order (known answer: wireguard-go).
func TestUAPIRandomMatchesWireguardGo(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	privs := make([]noise.PrivateKey, 3)
	for i := range privs {
		privs[i], _ = noise.NewPrivateKey()
	}
	var keys []string
	for range 5 {
		keys = append(keys, pubHex(t))
	}
	for _, k := range privs[:2] {
		p := k.PublicKey()
		keys = append(keys, p.Hex()) // the device's own key, at times
	}
	pfxs := []string{"0.0.0.0/0", "::/0", "10.0.0.0/8", "10.0.0.0/24", "10.0.0.1/32", "10.0.0.5/24",
		"2001:db8::/32", "::ffff:10.0.0.1/128", "10.1.0.0/16"}
	psk, _ := noise.NewPresharedKey()
	iters := 300
	if testing.Short() {
		iters = 50
	}
	for iter := range iters {
		ref := refDevice(t, "")
		ours := ourDevice(t, "")
		var reqs []string
		for step := range 6 {
			var b strings.Builder
			onPeer := false
			for range 1 + r.IntN(12) {
				switch c := r.IntN(100); {
				case c < 3 && !onPeer:
					fmt.Fprintf(&b, "private_key=%s\n", privs[r.IntN(len(privs))].Hex())
				case c < 5 && !onPeer:
					b.WriteString("replace_peers=true\n")
				case c < 6 && !onPeer:
					b.WriteString("listen_port=51820\n")
				case c < 30:
					fmt.Fprintf(&b, "public_key=%s\n", keys[r.IntN(len(keys))])
					onPeer = true
				case c < 35 && onPeer:
					b.WriteString("update_only=true\n")
				case c < 40 && onPeer:
					b.WriteString("remove=true\n")
				case c < 45 && onPeer:
					b.WriteString("replace_allowed_ips=true\n")
				case c < 70 && onPeer:
					fmt.Fprintf(&b, "allowed_ip=%s\n", pfxs[r.IntN(len(pfxs))])
				case c < 80 && onPeer:
					fmt.Fprintf(&b, "allowed_ip=-%s\n", pfxs[r.IntN(len(pfxs))])
				case c < 84 && onPeer:
					fmt.Fprintf(&b, "persistent_keepalive_interval=%d\n", r.IntN(3))
				case c < 87 && onPeer:
					fmt.Fprintf(&b, "endpoint=198.18.0.%d:51820\n", r.IntN(3))
				case c < 89 && onPeer:
					fmt.Fprintf(&b, "preshared_key=%s\n", psk.Hex())
				case c < 90:
					b.WriteString("bogus=1\n")
				case c < 91 && onPeer:
					b.WriteString("protocol_version=1\n")
				}
			}
			req := b.String()
			reqs = append(reqs, req)
			refErr := ref.IpcSet(req)
			ourErr := ours.IpcSet(strings.NewReader(req))
			if got, want := errnoOf(ourErr), errnoOf(refErr); got != want {
				t.Fatalf("iteration %d, request %d: errno = %d (%v), want %d (%v); requests:\n%s",
					iter, step, got, ourErr, want, refErr, strings.Join(reqs, "--\n"))
			}
			refGet, err := ref.IpcGet()
			if err != nil {
				t.Fatal(err)
			}
			var ob strings.Builder
			if err := ours.IpcGet(&ob); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(peerBlocks(refGet), peerBlocks(ob.String())); diff != "" {
				t.Fatalf("iteration %d, request %d: get=1 mismatch (-wireguard-go +ours):\n%s\nrequests:\n%s",
					iter, step, diff, strings.Join(reqs, "--\n"))
			}
		}
	}
}

// peerBlocks splits get=1 output into the device lines and one block per
// peer, sorted (wireguard-go keeps its peers in a map), with the lines
// that depend on traffic and time left out; each block keeps its
// allowed_ip lines in order (wg show lists them so).
func peerBlocks(s string) []string {
	parts := strings.Split(strings.TrimSpace(s), "public_key=")
	for i, b := range parts {
		var keep []string
		for _, l := range strings.Split(b, "\n") {
			k, _, _ := strings.Cut(l, "=")
			if l == "" || k == "tx_bytes" || k == "rx_bytes" || strings.HasPrefix(k, "last_handshake_time") {
				continue
			}
			keep = append(keep, l)
		}
		parts[i] = strings.Join(keep, "\n")
	}
	slices.Sort(parts[1:])
	return parts
}
