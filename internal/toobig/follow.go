package toobig

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/pathmtu"
)

// Expiry is how long an endpoint's path MTU is kept after the last
// "packet too big" that set it: Linux's net.ipv6.route.mtu_expires.
const Expiry = 10 * time.Minute

// sweep is how often a Follower looks for expired path MTUs.
const sweep = 30 * time.Second

// Source is where a Follower reads ICMPv6 messages (ListenICMP,
// ListenLink).
type Source interface {
	// ReadMessage reads one ICMPv6 message into buf and returns it (a
	// part of buf, type first, its checksum verified) and the router
	// that sent it. After Close it returns an error that wraps
	// net.ErrClosed or os.ErrClosed.
	ReadMessage(buf []byte) (msg []byte, from netip.Addr, err error)
	SetReadDeadline(t time.Time) error
	Close() error
}

// Setter is the sender whose path MTUs a Follower sets
// (fastpath.Engine, bind.Bind): SetPathMTU as Table.Set, PathMTUs as
// Table.All.
type Setter interface {
	SetPathMTU(dst netip.Addr, mtu int) bool
	PathMTUs() map[netip.Addr]int
}

// Config configures Follow.
type Config struct {
	Source Source
	Setter Setter
	// Ours reports whether an outer packet from src and UDP source port
	// sport is one of ours (a WAN address, a WireGuard port of the
	// moment). Called from the follower's goroutine.
	Ours func(src netip.Addr, sport uint16) bool
	// WANMTU returns the WAN MTU of the moment: an error reporting an
	// MTU no less than it is ignored (the packets are bounded already).
	WANMTU func() int
	Log    *slog.Logger
}

// Follower reads "packet too big" from a Source and sets a sender's path
// MTUs (see the package documentation), until Close.
type Follower struct {
	cfg  Config
	wg   sync.WaitGroup
	stop chan struct{} // closed by Close: ends a pause after a read error
	// set is the path MTUs the follower set, by endpoint (at most
	// pathmtu.MaxEntries), and oldest and newest the ends of their list
	// by at (the errors' times, which only grow): the run goroutine's
	// alone.
	set            map[netip.Addr]*learnt
	oldest, newest *learnt
	// logged is how many path MTUs set or expired were logged one by one
	// since the last sweep (at most logPerSweep), and unlogged how many
	// more were not: a flood of forged errors logged a line each.
	logged, unlogged int
}

// learnt is an endpoint's path MTU as the follower set it, in the
// follower's list by at.
type learnt struct {
	dst        netip.Addr
	mtu        int
	at         time.Time // when the last error that set it or reported it again came
	prev, next *learnt   // toward oldest, toward newest
}

// logPerSweep is how many path MTUs set or expired a Follower logs one by
// one per sweep; the others it counts in one line at the sweep.
const logPerSweep = 16

// Follow starts a Follower on cfg, which owns cfg.Source from now on.
func Follow(cfg Config) *Follower {
	f := &Follower{cfg: cfg, stop: make(chan struct{})}
	f.wg.Add(1)
	go f.run()
	return f
}

// Close closes the source and waits for the follower to stop. The path
// MTUs it set stay set. Nil-safe.
func (f *Follower) Close() {
	if f == nil {
		return
	}
	close(f.stop)
	f.cfg.Source.Close()
	f.wg.Wait()
}

// readPause is how long run waits after a failed read before it reads
// again.
const readPause = time.Second

// run reads the source until it is closed, setting the path MTUs of the
// errors it takes (take) and forgetting them after Expiry. A failed read
// is logged and read again after readPause: a packet socket (ListenLink)
// fails one read with ENETDOWN when its interface goes down, and reads
// again once it is up.
func (f *Follower) run() {
	defer f.wg.Done()
	buf := make([]byte, header.ICMPv6ErrorMaxLen+header.IPv6Len)
	next := time.Now().Add(sweep)
	for {
		f.cfg.Source.SetReadDeadline(next)
		msg, from, err := f.cfg.Source.ReadMessage(buf)
		now := time.Now()
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			if errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return
			}
			f.cfg.Log.Warn("ICMPv6 packet too big: a read failed; reading again", "err", err, "in", readPause)
			select {
			case <-f.stop:
				return
			case <-time.After(readPause):
			}
			now = time.Now()
		}
		if err == nil {
			f.take(msg, from, now)
		}
		if now.Before(next) {
			continue
		}
		next = now.Add(sweep)
		f.sweep(now)
	}
}

// sweep forgets the path MTUs set Expiry or longer before now, and logs
// how many were set or expired since the last sweep and not logged.
func (f *Follower) sweep(now time.Time) {
	for f.oldest != nil && now.Sub(f.oldest.at) >= Expiry {
		a := f.oldest.dst
		f.forget(a)
		if f.logOne() {
			f.cfg.Log.Info("path MTU toward an endpoint expired: full-size outer packets to it leave whole again", "endpoint", a)
		}
	}
	if f.unlogged > 0 {
		f.cfg.Log.Info("path MTUs toward endpoints set or expired and not logged one by one", "count", f.unlogged,
			"logged_at_most", logPerSweep, "every", sweep, "endpoints_with_path_mtu", len(f.set))
	}
	f.logged, f.unlogged = 0, 0
}

// logOne reports whether a path MTU set or expired is logged (logPerSweep
// are, between sweeps), counting it in unlogged when it is not.
func (f *Follower) logOne() bool {
	if f.logged < logPerSweep {
		f.logged++
		return true
	}
	f.unlogged++
	return false
}

// forget forgets the path MTU the follower set toward dst, in the sender
// and its list.
func (f *Follower) forget(dst netip.Addr) {
	l := f.set[dst]
	if l == nil {
		return
	}
	f.cfg.Setter.SetPathMTU(dst, 0)
	f.unlink(l)
	delete(f.set, dst)
}

func (f *Follower) unlink(l *learnt) {
	if l.prev != nil {
		l.prev.next = l.next
	} else {
		f.oldest = l.next
	}
	if l.next != nil {
		l.next.prev = l.prev
	} else {
		f.newest = l.prev
	}
	l.prev, l.next = nil, nil
}

// pushNewest puts l at the newest end of the list.
func (f *Follower) pushNewest(l *learnt) {
	l.prev = f.newest
	if f.newest != nil {
		f.newest.next = l
	} else {
		f.oldest = l
	}
	f.newest = l
}

// take sets the path MTU msg, an ICMPv6 message from the router from
// that came at now, reports, when it is a "packet too big" about an outer
// packet of ours (Parse, Config.Ours) with an MTU below the WAN's, and
// logs a change. As Linux's kernel, it discards one reporting an MTU
// below 1,280, and does not raise an endpoint's path MTU, nor keep it
// longer, for one reporting more (RFC 8201 §4); one reporting it again
// keeps it Expiry longer. With pathmtu.MaxEntries endpoints' path MTUs
// set, it forgets the one set longest ago for a new endpoint, as Linux
// evicts the oldest route exception, so that forged errors about
// addresses of no endpoint cannot keep a real one's out: the oldest is
// the head of the follower's list, not a scan of it (a flood of forged
// errors each about another address scanned 4,096 entries each). now
// must not be before the now of an earlier call. It returns the endpoint
// whose path MTU it set or kept.
func (f *Follower) take(msg []byte, from netip.Addr, now time.Time) (dst netip.Addr, ok bool) {
	tb, ok := Parse(msg)
	if !ok || tb.MTU < header.IPv6MinMTU || !f.cfg.Ours(tb.Src, tb.SrcPort) || tb.MTU >= f.cfg.WANMTU() {
		return dst, false
	}
	dst = tb.Dst.Unmap().WithZone("")
	if !dst.Is6() {
		return dst, false // an IPv4-mapped address: IPv4 needs none
	}
	if f.set == nil {
		f.set = make(map[netip.Addr]*learnt)
	}
	l := f.set[dst]
	switch {
	case l != nil && tb.MTU > l.mtu:
		return dst, false
	case l != nil && tb.MTU == l.mtu:
		f.unlink(l)
	default:
		if l == nil && len(f.set) >= pathmtu.MaxEntries {
			f.forget(f.oldest.dst)
		}
		if !f.cfg.Setter.SetPathMTU(dst, tb.MTU) {
			return dst, false
		}
		if f.logOne() {
			f.cfg.Log.Info("path MTU toward an endpoint lowered by an ICMPv6 packet too big: outer packets to it larger than that leave as IPv6 fragments",
				"endpoint", dst, "path_mtu", tb.MTU, "from", from, "expires_in", Expiry)
		}
		if l == nil {
			l = &learnt{dst: dst}
			f.set[dst] = l
		} else {
			f.unlink(l)
		}
	}
	l.mtu, l.at = tb.MTU, now
	f.pushNewest(l)
	return dst, true
}
