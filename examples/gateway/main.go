//go:build linux

// Command gateway is the smallest custom wgpio gateway: the fast path
// between a LAN and a WAN interface (AF_XDP) with one WireGuard peer, built
// on the library API (package fastgw) instead of a configuration file.
//
// It needs Linux 5.10 or later with XDP on both interfaces (native, or generic on
// any driver), and root or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF. Both
// interfaces must be in the current network namespace and the WAN must
// have an IP address (the kernel keeps owning it: shared address mode).
//
//	gateway -wan eth0 -lan eth1 -key /etc/wgpio/private.key \
//	    -peer <base64 public key> -endpoint 203.0.113.7:51820 -allowed 10.2.0.0/16
//
// Then `wg show gw0` shows it, and `wg set gw0 ...` changes it live.
//
// Linux only: every file is built for Linux alone.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/noise"
)

// parseConfig turns the command line into a gateway configuration.
func parseConfig(args []string) (fastgw.Config, error) {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	name := fs.String("name", "gw0", "UAPI socket and exception TUN name")
	wan := fs.String("wan", "", "encrypted-side interface (required)")
	lan := fs.String("lan", "", "plaintext-side interface (required)")
	keyFile := fs.String("key", "", "file holding the base64 private key (required)")
	port := fs.Uint("port", 51820, "WireGuard UDP listen port")
	peer := fs.String("peer", "", "the peer's base64 public key (required)")
	endpoint := fs.String("endpoint", "", "the peer's ip:port (optional: learnt from its first handshake)")
	allowed := fs.String("allowed", "", "comma-separated allowed IPs of the peer (required)")
	address := fs.String("address", "", "the gateway's own tunnel address, CIDR (optional)")
	if err := fs.Parse(args); err != nil {
		return fastgw.Config{}, err
	}
	if *wan == "" || *lan == "" || *keyFile == "" || *peer == "" || *allowed == "" || *port == 0 || *port > 65535 {
		return fastgw.Config{}, fmt.Errorf("-wan, -lan, -key, -peer and -allowed are required; -port 1-65535")
	}
	b, err := os.ReadFile(*keyFile)
	if err != nil {
		return fastgw.Config{}, fmt.Errorf("read private key: %w", err)
	}
	priv, err := noise.ParsePrivateKey(strings.TrimSpace(string(b)))
	if err != nil {
		return fastgw.Config{}, fmt.Errorf("%s: %w", *keyFile, err)
	}
	pub, err := noise.ParsePublicKey(*peer)
	if err != nil {
		return fastgw.Config{}, fmt.Errorf("-peer: %w", err)
	}
	pc := gateway.PeerConfig{PublicKey: pub}
	if *endpoint != "" {
		if pc.Endpoint, err = netip.ParseAddrPort(*endpoint); err != nil {
			return fastgw.Config{}, fmt.Errorf("-endpoint: %w", err)
		}
	}
	for _, s := range strings.Split(*allowed, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return fastgw.Config{}, fmt.Errorf("-allowed: %w", err)
		}
		pc.AllowedIPs = append(pc.AllowedIPs, p)
	}
	cfg := fastgw.Config{
		Name: *name, PrivateKey: priv, ListenPort: uint16(*port),
		WAN: *wan, LAN: *lan, Peers: []gateway.PeerConfig{pc},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
	if *address != "" {
		p, err := netip.ParsePrefix(*address)
		if err != nil {
			return fastgw.Config{}, fmt.Errorf("-address: %w", err)
		}
		cfg.Addresses = []netip.Prefix{p}
	}
	return cfg, nil
}

func main() {
	cfg, err := parseConfig(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0) // -h: the flags are printed, as asked
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(2)
	}
	// Signals are caught before Start, so that one that comes while it
	// runs stops the gateway once it is up, as one that comes later does.
	// SIGHUP: the terminal it ran in was closed.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	// Start opens the ports, attaches the XDP programs, runs one worker
	// per queue and the control plane, and serves the UAPI socket.
	g, err := fastgw.Start(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
	<-sig
	// Every packet the fast path dropped is counted by reason, per queue
	// (fastpath.DropReason), as every message the control plane dropped
	// (gateway.DropReason).
	stats := g.Engine().Stats()
	for i, q := range stats {
		fmt.Printf("queue %d: encrypted %d, decrypted %d\n", i, q.Encrypted, q.Decrypted)
	}
	fmt.Printf("dropped: %s; control plane: %s\n", orNone(fastpath.TotalDrops(stats).List()), orNone(g.Device().Stats().Losses()))
	// Close detaches the XDP programs and removes the UAPI socket.
	if err := g.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

// orNone joins counts ("reason=N") with commas, or says none.
func orNone(counts []string) string {
	if len(counts) == 0 {
		return "none"
	}
	return strings.Join(counts, ", ")
}
