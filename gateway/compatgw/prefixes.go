package compatgw

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/wgpio/wgpio/dataplane/afxdp"
)

// prefixFilter is the LAN port's prefix match (*afxdp.Port).
type prefixFilter interface {
	AddPrefix(netip.Prefix) error
	DeletePrefix(netip.Prefix) error
}

var _ prefixFilter = (*afxdp.Port)(nil)

// syncSpacing spaces the periodic syncs, in multiples of the last one's
// cost: a sync reads wireguard-go's whole configuration over its UAPI get
// (0.4-1 s of CPU at 50,000 peers, 16 MB of text), which every second
// would keep a core busy; spaced by 20 times its cost it takes at most a
// twentieth of a CPU. (A set through the UAPI socket or Gateway.IpcSet
// syncs at once, before its reply: handleUAPI.)
const syncSpacing = 20

// followPrefixes keeps the LAN filter in step with the allowed IPs, which
// the Go API (Device().IpcSet) may change, until Close: every interval,
// and no sooner than syncSpacing times the last sync's cost after it.
func (g *Gateway) followPrefixes(interval time.Duration) {
	defer g.wg.Done()
	poll := time.NewTimer(interval)
	defer poll.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-poll.C:
		}
		start := time.Now()
		if err := g.syncPrefixes(); err != nil {
			g.log.Warn("LAN XDP filter", "err", err)
		}
		poll.Reset(max(interval, syncSpacing*time.Since(start)))
	}
}

// syncPrefixes makes the LAN XDP filter redirect exactly the allowed IPs
// wireguard-go has (read over its UAPI get, parsed as it is written).
// Calls are serialized from the read on, so that a sync that read the
// allowed IPs before a change cannot undo the sync that read them after it.
func (g *Gateway) syncPrefixes() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := allowedIPsWriter{want: make(map[netip.Prefix]bool, len(g.prefixes))}
	if err := g.dev.IpcGetOperation(&w); err != nil {
		return fmt.Errorf("read wireguard-go's allowed IPs: %w", err)
	}
	w.Write([]byte{'\n'}) // a last line without its newline
	want := w.want
	var errs prefixErrors
	for p := range want {
		if !g.prefixes[p] {
			if err := g.filter.AddPrefix(p); err != nil {
				errs.add(fmt.Errorf("add %v: %w", p, err))
				continue
			}
			g.prefixes[p] = true
		}
	}
	for p := range g.prefixes {
		if !want[p] {
			if err := g.filter.DeletePrefix(p); err != nil {
				errs.add(fmt.Errorf("delete %v: %w", p, err))
				continue
			}
			delete(g.prefixes, p)
		}
	}
	return errs.err()
}

// maxPrefixErrors is how many failed prefixes a sync's error names; the
// others are counted. A LAN map too small for the configuration (ENOSPC
// for each prefix beyond it) made every sync's warning list them all: at
// 100,000 peers, a line of megabytes every few seconds.
const maxPrefixErrors = 10

// prefixErrors gathers a sync's errors, the first maxPrefixErrors of them
// and a count of the rest. The zero value is empty.
type prefixErrors struct {
	errs []error
	n    int
}

func (e *prefixErrors) add(err error) {
	e.n++
	if len(e.errs) < maxPrefixErrors {
		e.errs = append(e.errs, err)
	}
}

// err joins the errors kept (errors.Join; nil if none), followed by the
// number of those not kept.
func (e *prefixErrors) err() error {
	if more := e.n - len(e.errs); more > 0 {
		return errors.Join(append(e.errs, fmt.Errorf("%d more prefixes failed (%d in all), not listed", more, e.n))...)
	}
	return errors.Join(e.errs...)
}

// allowedIPsWriter collects the masked prefixes of the "allowed_ip=" lines
// of a UAPI get reply written to it, line by line as they come, without
// keeping the reply (tens of MB with many peers). Not safe for concurrent
// use.
type allowedIPsWriter struct {
	want    map[netip.Prefix]bool
	partial []byte // the start of a line cut between writes
}

func (w *allowedIPsWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			w.partial = append(w.partial, b...)
			break
		}
		line := b[:i]
		if len(w.partial) > 0 {
			w.partial = append(w.partial, line...)
			line = w.partial
		}
		if v, ok := bytes.CutPrefix(line, []byte("allowed_ip=")); ok {
			if p, err := netip.ParsePrefix(string(v)); err == nil {
				w.want[p.Masked()] = true
			}
		}
		w.partial = w.partial[:0]
		b = b[i+1:]
	}
	return n, nil
}
