//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/topo"
)

// The demo accounts for every datagram it offered: each direction's count
// at the sender, at wgpio (encrypted A→B, decrypted B→A) and at the
// receiver, and the drops counted on the way: wgpio's by reason and its
// ports' losses (the per-second lines), and the kernel's in the demo's
// namespaces (UDP buffer errors, links' dropped counters). What no counter
// explains lies in the stock wireguard-go peer, whose queues drop without
// a counter when its goroutines fall behind.

// kernelDrops is what the kernel counted as dropped in a set of
// namespaces: UDP datagrams it had no buffer room for (/proc/net/snmp's
// RcvbufErrors and SndbufErrors, read with prometheus/procfs; InErrors
// would count the first again) and frames its links dropped.
type kernelDrops struct {
	udp   map[string]uint64 // "namespace counter" → count
	links map[string]uint64 // "namespace link drops" → rx_dropped + tx_dropped + rx_missed of its links
}

// demoNS is one of the demo's namespaces and its role, which names it in
// the ledger.
type demoNS struct {
	role string
	ns   *topo.NS
}

// readKernelDrops reads the kernel's drop counters of each namespace.
func readKernelDrops(nss []demoNS) (kernelDrops, error) {
	k := kernelDrops{udp: map[string]uint64{}, links: map[string]uint64{}}
	for _, n := range nss {
		ns := n.ns
		err := ns.Do(func() error {
			// The counters of this thread's namespace (Do locked it into
			// ns): /proc/self/task/<tid>/net/snmp, where /proc/self/net
			// would be the process's.
			fs, err := procfs.NewFS("/proc/self/task")
			if err != nil {
				return err
			}
			p, err := fs.Proc(unix.Gettid())
			if err != nil {
				return err
			}
			snmp, err := p.Snmp()
			if err != nil {
				return err
			}
			for name, v := range map[string]*float64{"RcvbufErrors": snmp.Udp.RcvbufErrors, "SndbufErrors": snmp.Udp.SndbufErrors} {
				if v != nil {
					k.udp[n.role+" "+name] = uint64(*v)
				}
			}
			return nil
		})
		if err != nil {
			return k, fmt.Errorf("demo: UDP counters of %s: %w", ns.Name, err)
		}
		d, _, err := ns.LinkDrops()
		if err != nil {
			return k, fmt.Errorf("demo: link counters of %s: %w", ns.Name, err)
		}
		k.links[n.role+" link drops"] = d
	}
	return k, nil
}

// since returns the counters that grew from before to k, with how much,
// and their sum.
func (k kernelDrops) since(before kernelDrops) (total uint64, detail string) {
	var parts []string
	for _, m := range []struct{ now, then map[string]uint64 }{{k.udp, before.udp}, {k.links, before.links}} {
		for name, v := range m.now {
			if d := v - m.then[name]; v > m.then[name] {
				total += d
				parts = append(parts, fmt.Sprintf("%s=%d", name, d))
			}
		}
	}
	if len(parts) == 0 {
		return 0, "none"
	}
	slices.Sort(parts)
	return total, strings.Join(parts, ", ")
}

// demoLedger is what the demo reports of where its datagrams went.
// encrypted and decrypted are wgpio's counts, which include any other
// traffic through the tunnel in that time (the ping the demo suggests).
type demoLedger struct {
	sentAB, encrypted, receivedAB uint64 // host A → wgpio → host B
	sentBA, decrypted, receivedBA uint64 // host B → wgpio → host A
	wgpio                         string // wgpio's drops and port losses, or "none"
	workerDrops                   uint64 // wgpio's workers' drops (port losses are the kernel's link drops on veth)
	kernel                        uint64 // the kernel's drops in the namespaces
	kernelDetail                  string
}

// write prints the ledger: the counts at each stage, the drops counted,
// and what no counter explains. The unexplained datagrams are those lost
// end to end beyond every drop counted (the kernel's, wgpio's workers'),
// at most those lost between wgpio and host B either way: the stock
// peer's stretch. On veth, wgpio's port losses are the kernel's link
// drops in wgpio's namespace, so they are not added again; and a
// datagram wgpio counted that was not the demo's (a ping) neither hides a
// loss nor makes one.
func (l demoLedger) write(out io.Writer) {
	fmt.Fprintf(out, "where the datagrams went: A→B host A sent %d, wgpio encrypted %d, host B received %d; B→A host B sent %d, wgpio decrypted %d, host A received %d\n",
		l.sentAB, l.encrypted, l.receivedAB, l.sentBA, l.decrypted, l.receivedBA)
	if l.encrypted > l.sentAB || l.decrypted > l.sentBA {
		fmt.Fprintln(out, "(wgpio's counts include the other packets through the tunnel meanwhile, such as a ping)")
	}
	fmt.Fprintf(out, "drops counted: by wgpio: %s; by the kernel: %s\n", l.wgpio, l.kernelDetail)
	lost := sub(l.sentAB, l.receivedAB) + sub(l.sentBA, l.receivedBA)
	stock := sub(min(l.encrypted, l.sentAB), l.receivedAB) + sub(l.sentBA, l.decrypted)
	if n := min(stock, sub(lost, l.kernel+l.workerDrops)); n > 0 {
		fmt.Fprintf(out, "not counted: about %d in the stock wireguard-go peer, whose queues drop without a counter when its goroutines fall behind (load average %s)\n",
			n, loadAverage())
	}
}

// sub is a − b, or 0 when b ≥ a (counters read at different moments).
func sub(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return 0
}

// loadAverage is the first field of /proc/loadavg, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// drain waits until the receivers' counts stop growing (no datagram for
// quiet, at most max), so that datagrams still in flight when the senders
// stop are counted, not taken for losses.
func drain(quiet, max time.Duration, received func() uint64) {
	deadline := time.Now().Add(max)
	last := received()
	for time.Now().Before(deadline) {
		time.Sleep(quiet)
		now := received()
		if now == last {
			return
		}
		last = now
	}
}
