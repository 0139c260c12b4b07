//go:build linux

package main

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn/bindtest"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/noise"
)

// TestWGPeersFromDevice: a stock wireguard-go device's peers, read through
// its UAPI get operation as compat modes read them for `wgpio stats -json`
// and /metrics: every peer counted, the first max kept with its key and
// endpoint, in the device's order, no handshake yet.
func TestWGPeersFromDevice(t *testing.T) {
	dev := device.NewDevice(tuntest.NewChannelTUN().TUN(), bindtest.NewChannelBinds()[0], device.NewLogger(device.LogLevelError, "wg-go: "))
	t.Cleanup(dev.Close)
	priv, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	set := fmt.Sprintf("private_key=%s\n", hex.EncodeToString(priv[:]))
	keys := map[string]bool{}
	for i := range 5 {
		k, err := noise.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		pub := k.PublicKey()
		keys[base64.StdEncoding.EncodeToString(pub[:])] = true
		set += fmt.Sprintf("public_key=%s\nallowed_ip=198.19.%d.0/24\n", hex.EncodeToString(pub[:]), i)
		if i == 0 {
			set += "endpoint=198.18.0.9:51820\n"
		}
	}
	if err := dev.IpcSet(set); err != nil {
		t.Fatal(err)
	}
	wg := &wgPeers{get: dev.IpcGetOperation}
	for _, max := range []int{-1, 0, 2, 5, 9} {
		ps, n, err := wg.read(max)
		want := min(5, max)
		if max < 0 {
			want = 5
		}
		if err != nil || n != 5 || len(ps) != want {
			t.Fatalf("read(%d): %d peers kept of %d, %v; want %d of 5", max, len(ps), n, err, want)
		}
		for _, p := range ps {
			if !keys[p.PublicKey] || !p.LastHandshake.IsZero() || p.RxBytes != 0 || p.TxBytes != 0 {
				t.Errorf("read(%d): peer %+v, not one configured, or with a handshake or bytes", max, p)
			}
		}
	}
	all, _, _ := wg.read(-1)
	endpoints := 0
	for _, p := range all {
		if p.Endpoint != "" {
			endpoints++ // bindtest's endpoint, as it parsed the one set
		}
	}
	if endpoints != 1 {
		t.Errorf("%d peers with an endpoint, want 1", endpoints)
	}
	s := withPeers(slog.New(slog.DiscardHandler), compatStats("wg0", config.ModeCompat, &CompatStats{}, nil, nil), wg, 2)
	if s.PeersConfigured == nil || *s.PeersConfigured != 5 || len(s.Peers) != 2 {
		t.Errorf("withPeers(2): peers_configured %v, %d peers; want 5 and 2", s.PeersConfigured, len(s.Peers))
	}
}

// TestUAPIPeerParser: the UAPI get text in pieces of every size, as a
// writer may receive it; the last handshake from its two lines (0 and 0:
// none), the byte counts; a public key that is not 32 bytes of hex, or a
// count that is not a number, fails the read.
func TestUAPIPeerParser(t *testing.T) {
	k1, k2 := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	text := "private_key=" + strings.Repeat("01", 32) + "\nlisten_port=51820\n" +
		"public_key=" + k1 + "\nendpoint=[2001:db8::1]:51820\nlast_handshake_time_sec=1700000000\nlast_handshake_time_nsec=5000\ntx_bytes=100\nrx_bytes=200\nallowed_ip=198.19.0.0/24\n" +
		"public_key=" + k2 + "\nlast_handshake_time_sec=0\nlast_handshake_time_nsec=0\ntx_bytes=7\nrx_bytes=8\n" +
		"errno=0\n\n"
	for size := 1; size <= len(text); size++ {
		p := uapiPeerParser{max: -1}
		for i := 0; i < len(text); i += size {
			if _, err := p.Write([]byte(text[i:min(i+size, len(text))])); err != nil {
				t.Fatalf("pieces of %d: %v", size, err)
			}
		}
		if err := p.Close(); err != nil || p.n != 2 || len(p.peers) != 2 {
			t.Fatalf("pieces of %d: %d peers of %d, %v", size, len(p.peers), p.n, err)
		}
		b1, _ := hex.DecodeString(k1)
		want := []PeerStat{
			{PublicKey: base64.StdEncoding.EncodeToString(b1), Endpoint: "[2001:db8::1]:51820", LastHandshake: time.Unix(1700000000, 5000), TxBytes: 100, RxBytes: 200},
			{PublicKey: p.peers[1].PublicKey, TxBytes: 7, RxBytes: 8},
		}
		for i := range want {
			if got := p.peers[i]; got.PublicKey != want[i].PublicKey || got.Endpoint != want[i].Endpoint || !got.LastHandshake.Equal(want[i].LastHandshake) ||
				got.LastHandshake.IsZero() != want[i].LastHandshake.IsZero() || got.TxBytes != want[i].TxBytes || got.RxBytes != want[i].RxBytes {
				t.Fatalf("pieces of %d: peer %d = %+v, want %+v", size, i, got, want[i])
			}
		}
	}
	for _, bad := range []string{"public_key=abcd\n", "public_key=" + k1 + "\nrx_bytes=x\n", "public_key=" + k1 + "\nlast_handshake_time_sec=-\n"} {
		p := uapiPeerParser{max: -1}
		_, err := p.Write([]byte(bad))
		if err == nil {
			err = p.Close()
		}
		if err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestMetricsCompatPeers: a compat mode's peers (Device nil, their count
// in PeersConfigured) export wgpio_peers, and the per-peer metrics while
// they are at most MetricsPeers; without a count (the read failed),
// neither.
func TestMetricsCompatPeers(t *testing.T) {
	peers := []PeerStat{{PublicKey: "a", RxBytes: 5}, {PublicKey: "b"}, {PublicKey: "c", LastHandshake: time.Unix(1700000000, 0)}}
	three := uint64(3)
	for _, tc := range []struct {
		maxPeers int
		count    *uint64
		want     []string
		not      []string
	}{
		{3, &three, []string{`wgpio_peers{device="wg0"} 3`, `wgpio_peer_receive_bytes_total{device="wg0",public_key="a"} 5`, `wgpio_peer_last_handshake_seconds{device="wg0",public_key="c"} 1.7e+09`}, nil},
		{2, &three, []string{`wgpio_peers{device="wg0"} 3`}, []string{"wgpio_peer_receive"}},
		{config.Off, &three, []string{`wgpio_peers{device="wg0"} 3`}, []string{"wgpio_peer_receive"}},
		{3, nil, nil, []string{"wgpio_peers", "wgpio_peer_receive"}},
	} {
		s := GatewayStats{Name: "wg0", Mode: string(config.ModeCompat), Compat: &CompatStats{}, Peers: peers, PeersConfigured: tc.count}
		body := gatherText(t, newCollector("wg0", tc.maxPeers, func() GatewayStats { return s }, nil))
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("MetricsPeers %d: no %s in:\n%s", tc.maxPeers, w, body)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(body, n) {
				t.Errorf("MetricsPeers %d: %s exported:\n%s", tc.maxPeers, n, body)
			}
		}
	}
}
