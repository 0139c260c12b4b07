//go:build linux

// Command xdpreflect reflects Ethernet/IPv4/UDP frames with AF_XDP: every
// frame the filter redirects gets its MACs, IP addresses and UDP ports
// swapped and goes back out of the queue it came in on. Everything else
// reaches the kernel. It prints per-second counters until interrupted and
// detaches on exit (a kill -9 detaches too: the XDP program hangs on a
// bpf_link).
//
// Needs Linux 5.10+, root (or CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF).
//
//	xdpreflect -dev veth0 [-netns NAME] [-udp 198.18.0.2:9000-9001 | -all]
//
// Linux only (AF_XDP): every file is built for Linux alone.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/internal/plural"
)

func main() {
	dev := flag.String("dev", "", "interface to reflect on (required)")
	nsName := flag.String("netns", "", "network namespace of the interface (ip netns name); default: the current one")
	udp := flag.String("udp", "", "redirect UDP to ADDR:PORT or ADDR:LO-HI; default: everything (-all)")
	queues := flag.Int("queues", 0, "queues to open (default: all RX queues)")
	attach := flag.String("attach", "auto", "XDP attach mode: auto, native or generic")
	duration := flag.Duration("duration", 0, "stop after this long (default: until interrupted)")
	flag.Parse()
	if *dev == "" {
		flag.Usage()
		os.Exit(2)
	}
	cfg := afxdp.Config{Queues: *queues, Filter: afxdp.Filter{All: true}}
	switch *attach {
	case "auto":
	case "native":
		cfg.Attach = afxdp.AttachNative
	case "generic":
		cfg.Attach = afxdp.AttachGeneric
	default:
		log.Fatalf("-attach %q: want auto, native or generic", *attach)
	}
	if *udp != "" {
		m, err := parseUDP(*udp)
		if err != nil {
			log.Fatal(err)
		}
		cfg.Filter = afxdp.Filter{UDP: []afxdp.UDPMatch{m}}
	}
	port, err := open(*dev, *nsName, cfg)
	if err != nil {
		log.Fatal(err)
	}
	mode := "generic"
	if port.NativeXDP() {
		mode = "native"
	}
	umem := "copy"
	if port.ZeroCopy() {
		umem = "zero-copy"
	}
	fmt.Printf("reflecting on %s: %s, %s XDP, %s UMEM\n", port.Name(), plural.Count(port.NumQueues(), "queue", "queues"), mode, umem)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range port.NumQueues() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			Reflect(port.Queue(i), stop)
		}()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	var end <-chan time.Time
	if *duration > 0 {
		end = time.After(*duration)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := port.Stats()
loop:
	for {
		select {
		case <-sig:
			break loop
		case <-end:
			break loop
		case <-tick.C:
			s := port.Stats()
			fmt.Println(line(s, last))
			last = s
		}
	}
	close(stop)
	wg.Wait()
	if err := port.Close(); err != nil {
		log.Fatal(err)
	}
}

// open opens the port inside the namespace, if one is named.
func open(dev, nsName string, cfg afxdp.Config) (*afxdp.Port, error) {
	if nsName == "" {
		return afxdp.Open(dev, cfg)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("get current netns: %w", err)
	}
	defer orig.Close()
	h, err := netns.GetFromName(nsName)
	if err != nil {
		return nil, fmt.Errorf("find netns %s: %w", nsName, err)
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		return nil, fmt.Errorf("enter netns %s: %w", nsName, err)
	}
	p, err := afxdp.Open(dev, cfg)
	if serr := netns.Set(orig); serr != nil {
		log.Fatalf("restore netns: %v", serr) // this thread is unusable
	}
	return p, err
}

func parseUDP(s string) (afxdp.UDPMatch, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return afxdp.UDPMatch{}, fmt.Errorf("-udp %q: want ADDR:PORT or ADDR:LO-HI", s)
	}
	a, err := netip.ParseAddr(strings.Trim(s[:i], "[]"))
	if err != nil {
		return afxdp.UDPMatch{}, fmt.Errorf("-udp %q: %w", s, err)
	}
	lo, hi, _ := strings.Cut(s[i+1:], "-")
	if hi == "" {
		hi = lo
	}
	l, err1 := strconv.ParseUint(lo, 10, 16)
	h, err2 := strconv.ParseUint(hi, 10, 16)
	if err1 != nil || err2 != nil || l > h {
		return afxdp.UDPMatch{}, fmt.Errorf("-udp %q: bad port range", s)
	}
	return afxdp.UDPMatch{Addr: a, PortLo: uint16(l), PortHi: uint16(h)}, nil
}

// line formats one second of counters.
func line(s, last dataplane.Stats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rx %d pps, tx %d pps", s.RXPackets-last.RXPackets, s.TXPackets-last.TXPackets)
	for r := range dataplane.NumDropReasons {
		if d := s.Drops[r] - last.Drops[r]; d > 0 {
			fmt.Fprintf(&b, ", drop %s %d", r, d)
		}
	}
	for _, k := range []string{"xdp_redirect_udp", "xdp_redirect_all", "xdp_pass", "xdp_pass_no_socket", "xsk_rx_dropped", "xsk_rx_ring_full", "xsk_rx_fill_ring_empty_descs"} {
		if d := s.Backend[k] - last.Backend[k]; d > 0 {
			fmt.Fprintf(&b, ", %s %d", k, d)
		}
	}
	return b.String()
}

// Reflect reflects IPv4/UDP frames on q until stop is closed: it owns both
// halves of q. Other frames are freed.
func Reflect(q dataplane.Queue, stop <-chan struct{}) {
	rx, tx := q.RX(), q.TX()
	w, err := dataplane.NewWaiter()
	if err != nil {
		log.Print(err)
		return
	}
	defer w.Close()
	w.Add(rx)
	frames := make([]dataplane.Frame, 64)
	out := make([]dataplane.Frame, 0, 64)
	drop := make([]dataplane.Frame, 0, 64)
	for {
		n := rx.Receive(frames)
		if n == 0 {
			select {
			case <-stop:
				return
			default:
			}
			tx.Reclaim()
			w.Wait(100 * time.Millisecond)
			continue
		}
		out, drop = out[:0], drop[:0]
		for i := range n {
			if swap(frames[i].Data()) {
				out = append(out, frames[i])
			} else {
				drop = append(drop, frames[i])
			}
		}
		rx.Free(drop)
		m := tx.Transmit(out)
		rx.Free(out[m:])
	}
}

// swap turns an Ethernet/IPv4/UDP frame around in place: MACs, addresses
// and ports exchanged. The IPv4 and UDP checksums stay valid because a
// one's-complement sum does not depend on the order of its terms
// (RFC 1071).
func swap(b []byte) bool {
	if len(b) < 42 || binary.BigEndian.Uint16(b[12:]) != 0x0800 || b[14]&0xf0 != 0x40 {
		return false
	}
	l4 := 14 + int(b[14]&0x0f)*4
	if b[23] != 17 || len(b) < l4+8 {
		return false
	}
	for i := range 6 {
		b[i], b[6+i] = b[6+i], b[i]
	}
	for i := range 4 {
		b[26+i], b[30+i] = b[30+i], b[26+i]
	}
	b[l4], b[l4+1], b[l4+2], b[l4+3] = b[l4+2], b[l4+3], b[l4], b[l4+1]
	return true
}
