//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/tundev"
)

func cmdStats(args []string) error {
	fs := flag.NewFlagSet("stats", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: wgpio stats [-json] [NAME...]\n\nPrints the counters of running gateways: the named ones, or every one\n(each serves them on %s/NAME.stats).\n\n", runDir)
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, "print the raw JSON")
	if err := parseFlags(fs, reorder(args)); err != nil {
		return err
	}
	var names []string
	for _, name := range fs.Args() {
		if err := checkGatewayName(name); err != nil {
			return fmt.Errorf("stats: %w", err)
		}
		if !slices.Contains(names, name) { // each once
			names = append(names, name)
		}
	}
	all := len(names) == 0
	if all {
		if names = gatewaysHere(); len(names) == 0 {
			return fmt.Errorf("no running wgpio gateway found (no %s/*.stats socket)", runDir)
		}
	}
	return printGateways(names, all, *asJSON, os.Stderr)
}

// printGateways prints the counters of the gateways names (all: every one whose
// socket is here, gatewaysHere), as JSON with asJSON, and returns the
// errors of those it could not read. Asked for all, one whose socket
// refuses (left by a gateway that ended) is told of on stderr instead,
// and fails it only when no gateway answered.
func printGateways(names []string, all, asJSON bool, stderr io.Writer) error {
	var errs []error
	answered := 0
	for _, name := range names {
		s, raw, err := fetchStats(name)
		if err != nil {
			// A stale socket (a gateway killed with SIGKILL) must not
			// hide the others; asked for every gateway, it is told
			// of, and fails the command only when no gateway answered
			// (a gateway removed for good left its socket, and every
			// later `wgpio stats` failed).
			if all && errors.Is(err, syscall.ECONNREFUSED) {
				fmt.Fprintf(stderr, "wgpio: %v\n", err)
				continue
			}
			errs = append(errs, err)
			continue
		}
		answered++
		if asJSON {
			os.Stdout.Write(append(raw, '\n'))
			continue
		}
		printStats(name, s)
	}
	if all && answered == 0 && len(errs) == 0 {
		return fmt.Errorf("no running wgpio gateway answered (only sockets left by gateways that ended, in %s)", runDir)
	}
	return errors.Join(errs...)
}

func fetchStats(name string) (GatewayStats, []byte, error) {
	var s GatewayStats
	path := filepath.Join(runDir, name+".stats")
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return s, nil, fmt.Errorf("gateway %s: %w (%s)", name, err, dialHint(err, othersRunning("is `wgpio up` running?")))
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var raw json.RawMessage
	if err := json.NewDecoder(c).Decode(&raw); err != nil {
		return s, nil, fmt.Errorf("gateway %s: read stats: %w", name, err)
	}
	err = json.Unmarshal(raw, &s)
	return s, raw, err
}

func printStats(name string, s GatewayStats) {
	fmt.Printf("gateway %s\n", name)
	if s.UAPIRefused > 0 {
		fmt.Printf("UAPI socket: %d connections refused (64 served and 64 waiting, or no place within 15 s: a client holding connections open?)\n", s.UAPIRefused)
	}
	if s.LogLinesLost > 0 {
		fmt.Printf("log: %d lines lost (the gateway's standard error could not be written: its reader gone?)\n", s.LogLinesLost)
	}
	if s.Mode == string(config.ModeCompatMQTUN) {
		tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "side\trx\ttx\tdrops")
		if s.UDP != nil {
			fmt.Fprintf(tw, "wan (udp sockets)\t%d\t%d\t%s\n", s.UDP.RXPackets, s.UDP.TXPackets, orNone(s.UDP.Drops.List()))
		}
		if s.TUN != nil {
			fmt.Fprintf(tw, "lan (tun %s)\t%d\t%d\t%s\n", name, s.TUN.RXPackets, s.TUN.TXPackets, tunDrops(s.TUN))
		}
		tw.Flush()
		if s.TUN != nil {
			fmt.Printf("host unreachable to no_route: %d sent, %d suppressed, %d refused by the kernel\n", s.TUN.ICMPErrors, s.TUN.ICMPSuppressed, s.TUN.ICMPSendErrors)
		}
		fmt.Printf("Mode = compat-mqtun counts its TUN and UDP sockets; stock wireguard-go counts nothing of what it drops inside.\n"+
			"See `wg show %s` (peers, handshakes, transfer) and the kernel's counters (`ip -s link show %s`, `nstat`).\n", name, name)
		return
	}
	if s.Compat != nil {
		printCompatStats(s.Compat)
		printXDP(s.XDP)
		return
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	// "to host": transit packets the host's kernel forwards (a full
	// tunnel's); "for host": packets to its own addresses (SSH or
	// monitoring of the gateway through the tunnel).
	fmt.Fprintln(tw, "queue\tencrypted\tdecrypted\tkeepalives in\thandshakes in\tvia kernel\theld\tfragmented inner/outer\tpeer to peer\tto host\tfor host\ticmp sent/suppressed\tdrops")
	for i, q := range s.Queues {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d/%d\t%d\t%d\t%d\t%d/%d\t%s\n", i, q.Encrypted, q.Decrypted, q.KeepalivesReceived, q.HandshakesReceived, q.FromKernel, q.Held,
			q.Fragmented, q.OuterFragmented, q.PeerToPeer, q.ToHost, q.Exception, q.ICMPSent, q.ICMPSuppressed, orNone(q.Drops.List()))
	}
	tw.Flush()
	if s.Device != nil { // always, from a fast-path gateway of this version
		// The workers count what they receive, per queue (the columns "in"
		// above); the control plane sends every keepalive and handshake
		// message, counted for the whole gateway.
		var keepalivesIn uint64
		for _, q := range s.Queues {
			keepalivesIn += q.KeepalivesReceived
		}
		fmt.Printf("keepalives: %d sent, %d received\n", s.Device.KeepalivesSent, keepalivesIn)
		fmt.Printf("handshake messages sent: %d initiations, %d responses, %d cookie replies\n",
			s.Device.InitiationsSent, s.Device.ResponsesSent, s.Device.CookieRepliesSent)
		fmt.Printf("sessions: %d live, %d keypairs installed, %d responder keypairs expired unconfirmed\n",
			s.Device.LiveSessions, s.Device.KeypairsInstalledTotal, s.Device.ResponderUnconfirmedTotal)
		fmt.Printf("handshake backlog: %d waiting, %d at most\n",
			s.Device.HandshakeBacklog, s.Device.HandshakeBacklogPeak)
		if l := s.Device.Losses(); len(l) > 0 {
			fmt.Printf("control plane drops: %s\n", strings.Join(l, " "))
		}
	}
	if s.ExceptionDrops != nil && *s.ExceptionDrops > 0 {
		fmt.Printf("exception TUN drops: %d (packets for the host the kernel refused: down, its interface %s was down; full, its queue was)", *s.ExceptionDrops, s.Name)
		if s.TUN != nil {
			fmt.Printf(": %s", tunDrops(s.TUN))
		}
		fmt.Println()
	}
	// What the ports and the kernel dropped before the workers saw it.
	tw = tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "port\tqueue\trx\ttx\tcopies\tdrops")
	for i, q := range s.Queues {
		for _, p := range []struct {
			name string
			st   dataplane.Stats
		}{{"lan", q.LAN}, {"wan", q.WAN}} {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", p.name, i, p.st.RXPackets, p.st.TXPackets, p.st.Copies, portDrops(p.st))
		}
	}
	tw.Flush()
	printXDP(s.XDP)
	printReassembly(s.Reassembly)
	printNeighbours(s.Neighbours)
}

// printNeighbours prints the owned address mode's ARP and NDP counters
// (nothing in shared mode).
func printNeighbours(n map[string]fastgw.NeighbourStats) {
	for _, side := range []string{"lan", "wan"} {
		st, ok := n[side]
		if !ok {
			continue
		}
		var drops []string
		for k, v := range st.Drops {
			drops = append(drops, fmt.Sprintf("%s=%d", k, v))
		}
		sort.Strings(drops)
		fmt.Printf("neighbours %s (owned address mode): %d replies, frames dropped: %s; table: %d requests, %d failed, %d refused full, %d evicted; %d hosts claimed our address (%d frames)\n",
			side, st.Replies, orNone(drops), st.Requests, st.Failed, st.Full, st.Evicted, st.Conflicts, st.Claims)
		if m := st.MLD; m != nil {
			fmt.Printf("mld %s (owned address mode, VLAN): %d queries for our groups, %d reports sent, %d not sent\n", side, m.Queries, m.Reports, m.Errors)
		}
	}
}

// printReassembly prints the owned address mode's reassembly of the
// WireGuard datagrams that arrive as IP fragments (nothing without one).
func printReassembly(r *fastpath.ReassemblyStats) {
	if r == nil {
		return
	}
	fmt.Printf("reassembly (owned address mode): %d fragments, %d datagrams reassembled, %d in progress (%d bytes held), fragments dropped: %s\n",
		r.Fragments, r.Reassembled, r.InProgress, r.BytesHeld, orNone(r.Drops.List()))
}

// printXDP prints where the XDP programs sent frames (GatewayStats.XDP):
// to the workers (compat mode: the bind and tundev) or the kernel
// (xdp_pass_vlan: another VLAN's frames, never taken), or nowhere
// (xdp_drop_vlan: behind more VID-0 tags than the program takes off).
func printXDP(xdp map[string]map[string]uint64) {
	for _, port := range []string{"lan", "wan"} {
		if m, ok := xdp[port]; ok {
			l := xdpList(m)
			if len(l) == 0 {
				l = []string{"none yet"}
			}
			fmt.Printf("xdp %s: %s\n", port, strings.Join(l, " "))
		}
	}
}

// xdpList formats the nonzero XDP counters as sorted "name=count".
func xdpList(m map[string]uint64) []string {
	var out []string
	for k, v := range m {
		if v > 0 {
			out = append(out, fmt.Sprintf("%s=%d", k, v))
		}
	}
	sort.Strings(out)
	return out
}

// tunDrops lists a kernel TUN's drops (tundev.TUNStats), "none" when it
// has none.
func tunDrops(s *tundev.TUNStats) string { return orNone(s.Drops.List()) }

// orNone joins l with spaces, "none" when empty.
func orNone(l []string) string {
	if len(l) > 0 {
		return strings.Join(l, " ")
	}
	return "none"
}

// portDrops lists a port queue's losses (dataplane.Stats.Losses).
func portDrops(st dataplane.Stats) string {
	if l := st.Losses(); len(l) > 0 {
		return strings.Join(l, " ")
	}
	return "none"
}

// printCompatStats prints compat mode's counters: wgpio's bind (WAN) and
// PortDevice (LAN) under stock wireguard-go.
func printCompatStats(c *CompatStats) {
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "side\trx\ttx\tdrops")
	fmt.Fprintf(tw, "wan (bind)\t%d\t%d\t%s\n", c.Bind.RXPackets, c.Bind.TXPackets, strings.Join(c.Bind.Drops.List(), " "))
	fmt.Fprintf(tw, "lan (tundev)\t%d\t%d\t%s\n", c.LAN.RXPackets, c.LAN.TXPackets, strings.Join(c.LAN.Drops.List(), " "))
	tw.Flush()
	// The bind's datagrams over the WAN MTU, in its tx: sent as IP
	// fragments, as Linux fragments its WireGuard's.
	fmt.Printf("wan datagrams over the MTU sent as fragments: %d, in %d fragments\n", c.Bind.Fragmented, c.Bind.Fragments)
	// Those in its rx that the kernel reassembled from fragments for
	// the kernel socket on the listen port.
	fmt.Printf("wan datagrams received via kernel (reassembled): %d\n", c.Bind.FromKernel)
	// What the kernel dropped at the ports' sockets before the bind or
	// tundev read it.
	tw = tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "port\tqueue\tkernel drops")
	for _, p := range []struct {
		name string
		qs   []dataplane.Stats
	}{{"lan", c.LANQueues}, {"wan", c.WANQueues}} {
		for i, st := range p.qs {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", p.name, i, socketDrops(st))
		}
	}
	tw.Flush()
}

// socketDrops lists the kernel's drops at a queue's socket
// (dataplane.LossCounters of st.Backend), "none" when it dropped nothing.
func socketDrops(st dataplane.Stats) string {
	var l []string
	for _, k := range dataplane.LossCounters {
		if n := st.Backend[k]; n > 0 {
			l = append(l, fmt.Sprintf("%s=%d", k, n))
		}
	}
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, " ")
}

// gatewaysHere returns the names of the gateways whose stats sockets are
// in runDir (running, or left by one that was killed), in name order.
func gatewaysHere() []string {
	m, _ := filepath.Glob(filepath.Join(runDir, "*.stats"))
	names := make([]string, 0, len(m))
	for _, p := range m {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".stats"))
	}
	return names
}

// othersRunning is hint, then the gateways that have sockets here, for an
// error about a gateway that has none: a name mistyped.
func othersRunning(hint string) string {
	if names := gatewaysHere(); len(names) > 0 {
		return hint + "; the gateways here: " + strings.Join(names, ", ")
	}
	return hint
}

// dialHint is what to say after an error connecting to a gateway's socket
// in runDir: for a permission error, who may connect (the socket belongs
// to the user the gateway runs as, root or dist/wgpio.service's wgpio);
// for a refused connection, a stale socket of a gateway killed with
// SIGKILL; else notRunning, the likelier cause (no gateway).
func dialHint(err error, notRunning string) string {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return fmt.Sprintf("running as uid %d: the socket is the gateway's user's; run this as root or as that user", os.Getuid())
	case errors.Is(err, syscall.ECONNREFUSED):
		// The file is there and nothing listens on it: `wgpio stats`
		// of every gateway said "is wgpio up running?" of it, and
		// exited 1, while the gateways it could read ran.
		return "nothing listens on it: the socket was left by a gateway of that name that ended without removing it " +
			"(killed with SIGKILL, or crashed); the next `wgpio up` of that name replaces it, or remove the file"
	}
	return notRunning
}
