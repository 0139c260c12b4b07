//go:build linux

// Command lb is a load-balancer-style embedding of the wgpio fast path.
//
// WireGuard peers send UDP requests through the tunnel to a virtual address
// (the VIP, the gateway's own tunnel address). The fast path decrypts them
// on the NIC queues and hands every inner packet addressed to the VIP to a
// callback (fastpath.Config.Exception), on the worker that decrypted it. The
// balancer picks a backend by hashing the flow (source address and port), the
// backend answers, and the answer goes back into the tunnel through
// Engine.SendTunnel, which encrypts it for the peer whose allowed IPs hold
// its destination. The control plane (package gateway) does the handshakes
// and serves the UAPI socket, so wg(8) shows and sets it.
//
// There is no LAN: nothing leaves toward a plaintext network, so the fast
// path's plaintext side is an in-process memport pair.
//
// It needs Linux 5.10 or later with XDP on the WAN interface (native or generic),
// and root or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF (plus RLIMIT_MEMLOCK or
// CAP_IPC_LOCK for the UMEM). The WAN must have an IPv4 address.
//
//	lb -wan eth0 -key private.key -vip 10.9.0.1 -peer <base64> -allowed 10.9.0.2/32
//	# from the peer (nc: Debian's netcat-openbsd):
//	echo hello | nc -u -w1 10.9.0.1 7   →  "backend 2: hello"
//	# (0 to 3: the backend the flow hashes to, with a seed drawn at start)
//
// The peer is given no endpoint: its own configuration names the balancer
// (Endpoint = <WAN address>:51820), and the balancer answers it where its
// first handshake comes from.
//
// Linux only: every file is built for Linux alone.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/noise"
)

// Config configures a balancer.
type Config struct {
	Name       string // UAPI socket name
	WAN        string // interface
	ListenPort uint16
	PrivateKey noise.PrivateKey
	Peers      []gateway.PeerConfig
	// VIP is the service address inside the tunnel, ServicePort its UDP
	// port. ICMP echo requests to the VIP are answered too.
	VIP         netip.Addr
	ServicePort uint16
	// Backends is the number of backends (toy handlers in this process).
	Backends int
	Logger   *slog.Logger
}

// Balancer is a running load balancer.
type Balancer struct {
	cfg     Config
	engine  *fastpath.Engine
	dev     *gateway.Device
	wan     *afxdp.Port
	lan     [2]*memport.Port
	routes  *arp.KernelRoutes
	neigh   *arp.KernelNeighbours
	nl      *netlink.Handle
	stop    chan struct{}
	seed    maphash.Seed
	served  []atomic.Uint64 // per backend
	ignored atomic.Uint64   // packets to the VIP that are no request
	queue   atomic.Uint32
}

// wanResolver finds next-hop MACs on the WAN from the kernel's routes and
// neighbours (shared address mode).
type wanResolver struct {
	routes *arp.KernelRoutes
	table  *arp.Table
}

func (r *wanResolver) Resolve(dst netip.Addr) ([6]byte, bool) {
	nh, _, ok := r.routes.NextHop(dst)
	if !ok {
		return [6]byte{}, false
	}
	if mac, ok := r.table.Lookup(nh); ok {
		return mac, true
	}
	r.table.Resolve(nh)
	return [6]byte{}, false
}

// noLAN resolves nothing: the balancer sends nothing to a LAN.
type noLAN struct{}

func (noLAN) Resolve(netip.Addr) ([6]byte, bool) { return [6]byte{}, false }

// Start runs a balancer on cfg.WAN, which must be in the calling thread's
// network namespace.
func Start(cfg Config) (_ *Balancer, err error) {
	if !cfg.VIP.Is4() || cfg.ServicePort == 0 || cfg.Backends <= 0 {
		return nil, errors.New("lb: an IPv4 VIP, a service port and at least one backend are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Balancer{cfg: cfg, stop: make(chan struct{}), seed: maphash.MakeSeed(), served: make([]atomic.Uint64, cfg.Backends)}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	if b.nl, err = netlink.NewHandle(); err != nil {
		return nil, fmt.Errorf("lb: netlink: %w", err)
	}
	link, err := b.nl.LinkByName(cfg.WAN)
	if err != nil {
		return nil, fmt.Errorf("lb: interface %s: %w", cfg.WAN, err)
	}
	addrs, err := b.nl.AddrList(link, netlink.FAMILY_V4)
	if err != nil || len(addrs) == 0 {
		return nil, fmt.Errorf("lb: %s has no IPv4 address", cfg.WAN)
	}
	wanAddr, _ := netip.AddrFromSlice(addrs[0].IP.To4())

	// Next hops toward the peers' endpoints: the kernel's routes and
	// neighbours, followed over netlink.
	kopts := arp.KernelOptions{LinkIndex: link.Attrs().Index}
	if b.routes, err = arp.NewKernelRoutes(kopts); err != nil {
		return nil, fmt.Errorf("lb: %w", err)
	}
	table := arp.NewTable(arp.Config{Prober: &arp.KernelProber{Handle: b.nl, LinkIndex: link.Attrs().Index}})
	if b.neigh, err = arp.NewKernelNeighbours(table, kopts); err != nil {
		return nil, fmt.Errorf("lb: %w", err)
	}
	go table.Run(b.stop, 0)
	res := &wanResolver{routes: b.routes, table: table}

	// The WAN: WireGuard's UDP port on our address goes to AF_XDP, the
	// rest to the kernel.
	b.wan, err = afxdp.Open(cfg.WAN, afxdp.Config{Filter: afxdp.Filter{UDP: []afxdp.UDPMatch{{Addr: wanAddr, PortLo: cfg.ListenPort, PortHi: cfg.ListenPort}}}})
	if err != nil {
		return nil, fmt.Errorf("lb: %w", err)
	}
	lanA, lanB, err := memport.NewPair(memport.Config{Name: "lb", Queues: b.wan.NumQueues()})
	if err != nil {
		return nil, fmt.Errorf("lb: %w", err)
	}
	b.lan = [2]*memport.Port{lanA, lanB}

	b.engine, err = fastpath.New(fastpath.Config{
		LAN: lanA, WAN: b.wan, ListenPort: cfg.ListenPort, WANAddr4: wanAddr,
		WANResolver: res, LANResolver: noLAN{},
		TunnelAddrs: []netip.Addr{cfg.VIP},
		Exception:   b.handleBurst,
	})
	if err != nil {
		return nil, fmt.Errorf("lb: %w", err)
	}
	var mac [6]byte
	copy(mac[:], b.wan.MAC())
	b.dev, err = gateway.New(gateway.Options{
		Name: cfg.Name, PrivateKey: cfg.PrivateKey, ListenPort: cfg.ListenPort,
		Dataplane: b.engine, Logger: cfg.Logger, Resolve: res.Resolve,
		WANMAC: mac, WANAddr4: wanAddr,
	})
	if err != nil {
		return nil, fmt.Errorf("lb: %w", err)
	}
	if err := b.dev.AddPeers(cfg.Peers); err != nil {
		return nil, fmt.Errorf("lb: %w", err)
	}
	b.engine.Start()
	if err := b.dev.Start(); err != nil {
		return nil, fmt.Errorf("lb: %w", err)
	}
	return b, nil
}

// Served returns how many requests each backend answered.
func (b *Balancer) Served() []uint64 {
	out := make([]uint64, len(b.served))
	for i := range b.served {
		out[i] = b.served[i].Load()
	}
	return out
}

// Drops lists, as "reason=count" strings (empty when none), what the
// balancer dropped: the fast path's packets by fastpath.DropReason
// (unknown_index: a peer still sending on a session of a balancer that
// ran before, until its next handshake), the control plane's messages by
// gateway.DropReason, and the packets to the VIP that were no request
// (ignored). What a peer sent and got no answer to is counted here.
func (b *Balancer) Drops() []string {
	out := fastpath.TotalDrops(b.engine.Stats()).List()
	out = append(out, b.dev.Stats().Losses()...)
	if n := b.ignored.Load(); n > 0 {
		out = append(out, fmt.Sprintf("ignored=%d", n))
	}
	return out
}

// Close stops everything and detaches the XDP program.
func (b *Balancer) Close() {
	if b.dev != nil {
		b.dev.Close()
	}
	if b.engine != nil {
		b.engine.Close()
	}
	for _, p := range b.lan {
		if p != nil {
			p.Close()
		}
	}
	if b.wan != nil {
		b.wan.Close()
	}
	close(b.stop)
	if b.neigh != nil {
		b.neigh.Close()
	}
	if b.routes != nil {
		b.routes.Close()
	}
	if b.nl != nil {
		b.nl.Close()
	}
}

// handleBurst is the fast path's Exception callback: a worker's burst of
// packets for the VIP, each handled in turn.
func (b *Balancer) handleBurst(_ int, pkts [][]byte) {
	for _, p := range pkts {
		b.handle(p)
	}
}

// handle handles one packet of the Exception callback: pkt is a decrypted inner
// IP packet addressed to the VIP, from a peer whose allowed IPs hold its
// source. It runs on the worker that decrypted it, concurrently with the
// other workers, and must not keep pkt. Replies are built in a buffer of
// this call and copied by SendTunnel.
func (b *Balancer) handle(pkt []byte) {
	var p header.Packet
	if header.ParseIP(pkt, &p) != header.OK || p.IPVersion != 4 {
		b.ignored.Add(1)
		return
	}
	var buf [1500]byte
	var n int
	switch {
	case p.Proto == header.ProtoUDP && p.DstPort == b.cfg.ServicePort:
		n = b.serveUDP(buf[:], &p, pkt)
	case p.Proto == 1 && pkt[p.L4Off] == 8: // ICMP echo request (RFC 792)
		n = echoReply(buf[:], &p, pkt)
	}
	if n == 0 {
		b.ignored.Add(1)
		return
	}
	b.engine.SendTunnel(int(b.queue.Add(1)), buf[:n])
}

// serveUDP picks the backend of the flow and writes its answer as an IPv4
// UDP packet into buf; it returns the packet's length, or 0.
func (b *Balancer) serveUDP(buf []byte, p *header.Packet, pkt []byte) int {
	var h maphash.Hash
	h.SetSeed(b.seed)
	src := p.Src.As4()
	h.Write(src[:])
	var port [2]byte
	binary.BigEndian.PutUint16(port[:], p.SrcPort)
	h.Write(port[:])
	backend := int(h.Sum64() % uint64(len(b.served)))
	b.served[backend].Add(1)

	// The backend: a toy that names itself and echoes the request.
	req := pkt[p.PayloadOff : p.PayloadOff+p.PayloadLen]
	off := header.IPv4MinLen + header.UDPLen
	payload := buf[off:off]
	payload = fmt.Appendf(payload, "backend %d: ", backend)
	payload = append(payload, req[:min(len(req), len(buf)-off-len(payload))]...)

	f := header.IPv4Fields{Protocol: header.ProtoUDP, Src: p.Dst.As4(), Dst: src}
	header.PutIPv4(buf, &f, header.UDPLen+len(payload))
	u := header.UDP(buf[header.IPv4MinLen:])
	header.PutUDP(u, p.DstPort, p.SrcPort, len(payload))
	u = u[:header.UDPLen+len(payload)]
	u.SetChecksum(header.PseudoHeaderChecksum(header.ProtoUDP, p.Dst, p.Src, len(u)))
	return off + len(payload)
}

// echoReply writes the ICMP echo reply (RFC 792) to an echo request.
func echoReply(buf []byte, p *header.Packet, pkt []byte) int {
	icmp := pkt[p.L4Off:p.L3End]
	if len(icmp) < 8 || header.IPv4MinLen+len(icmp) > len(buf) {
		return 0
	}
	f := header.IPv4Fields{Protocol: 1, Src: p.Dst.As4(), Dst: p.Src.As4()}
	header.PutIPv4(buf, &f, len(icmp))
	r := buf[header.IPv4MinLen : header.IPv4MinLen+len(icmp)]
	copy(r, icmp)
	r[0] = 0 // echo reply
	r[2], r[3] = 0, 0
	binary.BigEndian.PutUint16(r[2:], header.FoldChecksum(header.Checksum(r, 0)))
	return header.IPv4MinLen + len(icmp)
}

func main() {
	fs := flag.NewFlagSet("lb", flag.ExitOnError)
	name := fs.String("name", "lb0", "UAPI socket name")
	wan := fs.String("wan", "", "WAN interface (required)")
	port := fs.Uint("port", 51820, "WireGuard UDP port")
	keyFile := fs.String("key", "", "file holding the base64 private key (required)")
	vip := fs.String("vip", "", "service address inside the tunnel (required)")
	svc := fs.Uint("service-port", 7, "service UDP port")
	backends := fs.Int("backends", 4, "number of backends")
	peer := fs.String("peer", "", "a peer's base64 public key (required)")
	allowed := fs.String("allowed", "", "comma-separated allowed IPs of the peer (required)")
	fs.Parse(os.Args[1:])
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "lb:", err)
		os.Exit(1)
	}
	if *wan == "" || *keyFile == "" || *vip == "" || *peer == "" || *allowed == "" {
		fmt.Fprintln(os.Stderr, "lb: -wan, -key, -vip, -peer and -allowed are required")
		fs.Usage()
		os.Exit(2)
	}
	if *port == 0 || *port > 65535 || *svc == 0 || *svc > 65535 {
		fail(fmt.Errorf("-port %d and -service-port %d: want 1-65535", *port, *svc))
	}
	key, err := os.ReadFile(*keyFile)
	if err != nil {
		fail(err)
	}
	cfg := Config{Name: *name, WAN: *wan, ListenPort: uint16(*port), ServicePort: uint16(*svc), Backends: *backends,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	if cfg.PrivateKey, err = noise.ParsePrivateKey(strings.TrimSpace(string(key))); err != nil {
		fail(err)
	}
	if cfg.VIP, err = netip.ParseAddr(*vip); err != nil {
		fail(err)
	}
	pc := gateway.PeerConfig{}
	if pc.PublicKey, err = noise.ParsePublicKey(*peer); err != nil {
		fail(err)
	}
	for _, s := range strings.Split(*allowed, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			fail(err)
		}
		pc.AllowedIPs = append(pc.AllowedIPs, p)
	}
	cfg.Peers = []gateway.PeerConfig{pc}
	// Signals are caught before Start, so that one that comes while it
	// runs stops the balancer once it is up, as one that comes later does.
	// SIGHUP: the terminal it ran in was closed.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	b, err := Start(cfg)
	if err != nil {
		fail(err)
	}
	cfg.Logger.Info("balancer up", "name", cfg.Name, "wan", cfg.WAN, "listen_port", cfg.ListenPort,
		"vip", cfg.VIP, "service_port", cfg.ServicePort, "backends", cfg.Backends)
	<-sig
	fmt.Println("requests served per backend:", b.Served())
	drops := "none"
	if d := b.Drops(); len(d) > 0 {
		drops = strings.Join(d, ", ")
	}
	fmt.Println("dropped:", drops)
	b.Close()
}
