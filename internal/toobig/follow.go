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
	// pathmtu.MaxEntries): the run goroutine's alone.
	set map[netip.Addr]learnt
}

// learnt is an endpoint's path MTU as the follower set it.
type learnt struct {
	mtu int
	at  time.Time // when the last error that set it or reported it again came
}

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
		for a, l := range f.set {
			if now.Sub(l.at) >= Expiry {
				f.cfg.Setter.SetPathMTU(a, 0)
				delete(f.set, a)
				f.cfg.Log.Info("path MTU toward an endpoint expired: full-size outer packets to it leave whole again", "endpoint", a)
			}
		}
	}
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
// addresses of no endpoint cannot keep a real one's out. It returns the
// endpoint whose path MTU it set or kept.
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
		f.set = make(map[netip.Addr]learnt)
	}
	old, known := f.set[dst]
	switch {
	case known && tb.MTU > old.mtu:
		return dst, false
	case known && tb.MTU == old.mtu:
	default:
		if !known && len(f.set) >= pathmtu.MaxEntries {
			f.evictOldest()
		}
		if !f.cfg.Setter.SetPathMTU(dst, tb.MTU) {
			return dst, false
		}
		f.cfg.Log.Info("path MTU toward an endpoint lowered by an ICMPv6 packet too big: outer packets to it larger than that leave as IPv6 fragments",
			"endpoint", dst, "path_mtu", tb.MTU, "from", from, "expires_in", Expiry)
	}
	f.set[dst] = learnt{mtu: tb.MTU, at: now}
	return dst, true
}

// evictOldest forgets the path MTU set longest ago (a scan of f.set: a
// cost per new endpoint with the table full, not per packet).
func (f *Follower) evictOldest() {
	var oldest netip.Addr
	var at time.Time
	for a, l := range f.set {
		if !oldest.IsValid() || l.at.Before(at) {
			oldest, at = a, l.at
		}
	}
	f.cfg.Setter.SetPathMTU(oldest, 0)
	delete(f.set, oldest)
}
