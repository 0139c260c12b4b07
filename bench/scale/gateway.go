//go:build linux

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netns"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/internal/srcaddr"
	"github.com/wgpio/wgpio/noise"
)

// The shared builder of the parts: one fast-path gateway in this process,
// as gateway/fastgw wires it (a fastpath.Engine, a gateway.Device over it,
// the UAPI socket), with memport pairs in place of the AF_XDP ports.
//
//	host ⇄ LAN [engine + device] WAN ⇄ far
//
// A part sends plaintext frames from Host (to the LAN port), WireGuard
// frames from Far (to the WAN port), and reads what the gateway sends on
// the same two ports.

// Addresses of the rig (in-process only: nothing leaves the process).
var (
	gwWAN4   = netip.MustParseAddr("198.18.0.1")
	gwFar4   = netip.MustParseAddr("198.18.0.2")
	gwLAN4   = netip.MustParseAddr("198.19.255.254")
	gwListen = uint16(51820)
)

// gatewayOptions configures newGateway.
type gatewayOptions struct {
	// Queues is the number of queue pairs (workers), default 1.
	Queues int
	// RingSize is the memport rings' size in frames, default 1024.
	RingSize int
	// Name, if not empty, serves the UAPI socket /var/run/wireguard/Name.sock
	// (the one `wg` talks to); uapiName makes a unique one.
	Name string
	// PrivateKey of the gateway; zero: a fresh one.
	PrivateKey noise.PrivateKey
	// Peers are added before the device starts (the start-up path of
	// wgpio up: gateway.Device.AddPeers).
	Peers []gateway.PeerConfig
	// Engine adjusts the engine's configuration before it is made (CPUs,
	// Burst...); may be nil.
	Engine func(*fastpath.Config)
	// Device adjusts the device's options before it is made (handshake
	// workers...); may be nil.
	Device func(*gateway.Options)
	// Logger of the device (default: discard).
	Logger *slog.Logger
}

// scaleGateway is a running in-process gateway; Close stops it and removes
// its socket.
type scaleGateway struct {
	Name       string
	Host, LAN  *memport.Port // Host ⇄ LAN: the plaintext side
	WAN, Far   *memport.Port // WAN ⇄ Far: the encrypted side
	Engine     *fastpath.Engine
	Dev        *gateway.Device
	PrivateKey noise.PrivateKey
	WAN4, Far4 netip.Addr
	ListenPort uint16
	// Routes gives the device the source the kernel's route toward an
	// endpoint chooses (gateway.Options.Source), asked of this process's
	// namespace as wgpio up's gateway asks its own (fastgw, shared mode).
	Routes  *srcaddr.Routes
	closers []func()
}

// portMAC is the MAC of the memport port numbered b in newGateway: the
// gateway's WAN is 3 and the far side's port 4 (gwWANMAC, gwFarMAC), so
// simulated peers can address frames before any gateway exists.
func portMAC(b byte) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0x20, b} }

var (
	gwWANMAC = [6]byte(portMAC(3))
	gwFarMAC = [6]byte(portMAC(4))
)

// fixedResolver answers every address with one MAC.
type fixedResolver [6]byte

func (r fixedResolver) Resolve(netip.Addr) ([6]byte, bool) { return r, true }

func mac6(m net.HardwareAddr) [6]byte { var r [6]byte; copy(r[:], m); return r }

// newGateway builds and starts a gateway: ports, engine, device (with
// o.Peers), workers, the device's loop and (o.Name) the UAPI socket.
func newGateway(o gatewayOptions) (g *scaleGateway, err error) {
	if o.Queues <= 0 {
		o.Queues = 1
	}
	if o.RingSize <= 0 {
		o.RingSize = 1024
	}
	g = &scaleGateway{Name: o.Name, WAN4: gwWAN4, Far4: gwFar4, ListenPort: gwListen}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	mk := func(name string, a, b byte) (*memport.Port, *memport.Port, error) {
		x, y, err := memport.NewPair(memport.Config{Name: name, Queues: o.Queues, RingSize: o.RingSize,
			MACA: portMAC(a), MACB: portMAC(b)})
		if err == nil {
			g.closers = append(g.closers, func() { x.Close(); y.Close() })
		}
		return x, y, err
	}
	if g.Host, g.LAN, err = mk("sh", 1, 2); err != nil {
		return nil, err
	}
	if g.WAN, g.Far, err = mk("sw", 3, 4); err != nil {
		return nil, err
	}
	farMAC := mac6(g.Far.MAC())
	cfg := fastpath.Config{
		LAN: g.LAN, WAN: g.WAN, ListenPort: gwListen, WANAddr4: gwWAN4, LANAddr4: gwLAN4,
		WANResolver: fixedResolver(farMAC), LANResolver: fixedResolver(mac6(g.Host.MAC())),
	}
	if o.Engine != nil {
		o.Engine(&cfg)
	}
	if g.Engine, err = fastpath.New(cfg); err != nil {
		return nil, err
	}
	g.closers = append(g.closers, func() { g.Engine.Close() })
	g.PrivateKey = o.PrivateKey
	if g.PrivateKey.IsZero() {
		if g.PrivateKey, err = noise.NewPrivateKey(); err != nil {
			return nil, err
		}
	}
	// As fastgw's shared mode: the route's source toward each endpoint
	// not heard from, its changes followed (RefreshSources).
	if g.Routes, err = srcaddr.NewRoutes(netns.None(), srcaddr.DefaultRoutes, nil); err != nil {
		return nil, err
	}
	g.closers = append(g.closers, func() { g.Routes.Close() })
	dopts := gateway.Options{
		Name: o.Name, PrivateKey: g.PrivateKey, ListenPort: gwListen, FixedListenPort: true,
		Dataplane: g.Engine, Logger: o.Logger, WANMAC: mac6(g.WAN.MAC()), WANAddr4: gwWAN4,
		Resolve: func(netip.Addr) ([6]byte, bool) { return farMAC, true },
		Source:  g.Routes,
	}
	if o.Device != nil {
		o.Device(&dopts)
	}
	g.Dev, err = gateway.New(dopts)
	if err != nil {
		return nil, err
	}
	g.closers = append(g.closers, func() { g.Dev.Close() })
	if len(o.Peers) > 0 {
		if err := g.Dev.AddPeers(o.Peers); err != nil {
			return nil, err
		}
	}
	g.Engine.Start()
	if err := g.Dev.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		for {
			select {
			case <-done:
				return
			case <-g.Routes.Changed():
				g.Dev.RefreshSources()
			}
		}
	}()
	g.closers = append(g.closers, func() { close(done); <-followed })
	if o.Name != "" {
		g.closers = append(g.closers, func() { os.Remove(uapiPath(o.Name)) })
	}
	return g, nil
}

// Close stops the gateway, closes its ports and removes its socket.
func (g *scaleGateway) Close() {
	for i := len(g.closers) - 1; i >= 0; i-- {
		g.closers[i]()
	}
	g.closers = nil
}

// uapiDir is where wg(8) and wireguard-go's ipc package look for sockets.
const uapiDir = "/var/run/wireguard"

func uapiPath(name string) string { return filepath.Join(uapiDir, name+".sock") }

// uapiName returns an interface name (at most 15 bytes, as wg(8) accepts)
// whose socket does not exist yet: tag and this process's ID.
func uapiName(tag string) string {
	for i := 0; ; i++ {
		n := fmt.Sprintf("%s%d", tag, os.Getpid())
		if i > 0 {
			n += "-" + strconv.Itoa(i)
		}
		if len(n) > 15 {
			n = n[len(n)-15:]
		}
		if _, err := os.Stat(uapiPath(n)); errors.Is(err, os.ErrNotExist) {
			return n
		}
	}
}

// uapiRequest sends one request (op "set=1" or "get=1" with its body
// lines, each ending in a newline) to the socket of name, as wg(8) does,
// and reads the reply up to its "errno=" line. reply receives the lines
// before it (the get output); errno is the reply's.
func uapiRequest(name, op, body string, reply io.Writer) (errno int, err error) {
	c, err := net.Dial("unix", uapiPath(name))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Minute))
	w := bufio.NewWriterSize(c, 1<<16)
	w.WriteString(op + "\n")
	w.WriteString(body)
	w.WriteString("\n")
	if err := w.Flush(); err != nil {
		return 0, err
	}
	r := bufio.NewReaderSize(c, 1<<16)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return 0, fmt.Errorf("uapi %s: reply: %w", op, err)
		}
		if v, ok := bytes.CutPrefix(line, []byte("errno=")); ok {
			n, err := strconv.Atoi(strings.TrimSpace(string(v)))
			if err != nil {
				return 0, fmt.Errorf("uapi %s: reply %q", op, line)
			}
			return n, nil
		}
		if reply != nil {
			if _, err := reply.Write(line); err != nil {
				return 0, err
			}
		}
	}
}

// uapiSet sends a set=1 request; an errno other than 0 is an error.
func uapiSet(name, body string) error {
	errno, err := uapiRequest(name, "set=1", body, nil)
	if err == nil && errno != 0 {
		err = fmt.Errorf("uapi set: errno=%d", errno)
	}
	return err
}

// lineCounter counts the lines written to it that start with prefix.
type lineCounter struct {
	prefix []byte
	n      int
}

func (c *lineCounter) Write(b []byte) (int, error) {
	if bytes.HasPrefix(b, c.prefix) {
		c.n++
	}
	return len(b), nil
}

// scalePeers makes n peers' configurations: peer i has a random public key
// (any 32 bytes are a key the device takes; no handshake uses them), one
// IPv4 /32 and one IPv6 /128 (peerPrefixes). seed makes them repeatable.
func scalePeers(n int, seed uint64) []gateway.PeerConfig {
	rng := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 's', 'c', 'a', 'l', 'e'}))
	out := make([]gateway.PeerConfig, n)
	for i := range out {
		var k noise.PublicKey
		for j := 0; j < len(k); j += 8 {
			v := rng.Uint64()
			for b := 0; b < 8; b++ {
				k[j+b] = byte(v >> (8 * b))
			}
		}
		out[i] = gateway.PeerConfig{PublicKey: k, AllowedIPs: peerPrefixes(i, 0)}
	}
	return out
}

// peerPrefixes returns peer i's allowed IPs in generation gen: a /32 and a
// /128. IPv4 /32s come from 198.18.0.0/15 above the rig's own addresses
// (131,000 of them), then from 10.0.0.0/8 for larger runs; gen moves them
// into another IPv6 /64 and (IPv4) past the first generation's, so that a
// change gives a peer prefixes no one holds.
func peerPrefixes(i, gen int) []netip.Prefix {
	const base4 = 1024 // 198.18.4.0 onward
	v := uint32(i + gen*2_000_000)
	var a4 netip.Addr
	if v < 1<<17-2*base4 {
		x := uint32(198)<<24 | uint32(18)<<16 + base4 + v
		a4 = netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
	} else {
		x := uint32(10)<<24 + v
		a4 = netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
	}
	var b16 [16]byte
	copy(b16[:], []byte{0xfd, 0x00, 0x5c, 0xa1, 0x00, 0x00, 0x00, byte(gen)})
	b16[12], b16[13], b16[14], b16[15] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
	return []netip.Prefix{netip.PrefixFrom(a4, 32), netip.PrefixFrom(netip.AddrFrom16(b16), 128)}
}
