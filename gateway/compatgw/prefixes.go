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

// Spacing of the syncs, in multiples of the last one's cost: a sync reads
// wireguard-go's whole configuration over its UAPI get (0.4-1 s of CPU at
// 50,000 peers, 16 MB of text), which every second would keep a core
// busy. A sync for a UAPI client's change waits at least syncSpacingAsked
// times the last sync's cost after it (at most a fifth of a CPU while a
// script runs wg set after wg set); the periodic one, for changes through
// the Go API, at least syncSpacingPoll times (a twentieth of a CPU).
const (
	syncSpacingAsked = 4
	syncSpacingPoll  = 20
)

// syncSoon asks followPrefixes for a sync: a UAPI client may have changed
// wireguard-go's allowed IPs. Requests made while one waits coalesce.
func (g *Gateway) syncSoon() {
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// followPrefixes keeps the LAN filter in step with the allowed IPs, which
// wg(8) or the Go API may change, until Close: after each UAPI connection
// (syncSoon) and every interval, each sync spaced from the last by a
// multiple of its cost (syncSpacingAsked, syncSpacingPoll).
func (g *Gateway) followPrefixes(interval time.Duration) {
	defer g.wg.Done()
	poll := time.NewTimer(interval)
	defer poll.Stop()
	var last time.Time     // when the last sync ended
	var cost time.Duration // what it took
	for {
		select {
		case <-g.stop:
			return
		case <-poll.C:
		case <-g.changed:
			if wait := time.Until(last.Add(syncSpacingAsked * cost)); wait > 0 {
				select {
				case <-g.stop:
					return
				case <-time.After(wait):
				}
			}
		}
		start := time.Now()
		if err := g.syncPrefixes(); err != nil {
			g.log.Warn("LAN XDP filter", "err", err)
		}
		last = time.Now()
		cost = last.Sub(start)
		poll.Reset(max(interval, syncSpacingPoll*cost))
	}
}

// syncPrefixes makes the LAN XDP filter redirect exactly the allowed IPs
// wireguard-go has (read over its UAPI get, parsed as it is written).
func (g *Gateway) syncPrefixes() error {
	w := allowedIPsWriter{want: make(map[netip.Prefix]bool, len(g.prefixes))}
	if err := g.dev.IpcGetOperation(&w); err != nil {
		return fmt.Errorf("read wireguard-go's allowed IPs: %w", err)
	}
	w.Write([]byte{'\n'}) // a last line without its newline
	want := w.want
	g.mu.Lock()
	defer g.mu.Unlock()
	var errs []error
	for p := range want {
		if !g.prefixes[p] {
			if err := g.filter.AddPrefix(p); err != nil {
				errs = append(errs, fmt.Errorf("add %v: %w", p, err))
				continue
			}
			g.prefixes[p] = true
		}
	}
	for p := range g.prefixes {
		if !want[p] {
			if err := g.filter.DeletePrefix(p); err != nil {
				errs = append(errs, fmt.Errorf("delete %v: %w", p, err))
				continue
			}
			delete(g.prefixes, p)
		}
	}
	return errors.Join(errs...)
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
