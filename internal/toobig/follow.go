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
	cfg Config
	wg  sync.WaitGroup
}

// Follow starts a Follower on cfg, which owns cfg.Source from now on.
func Follow(cfg Config) *Follower {
	f := &Follower{cfg: cfg}
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
	f.cfg.Source.Close()
	f.wg.Wait()
}

// run reads the source until it is closed, setting the path MTUs of the
// errors it takes (take) and forgetting them after Expiry.
func (f *Follower) run() {
	defer f.wg.Done()
	set := make(map[netip.Addr]time.Time) // endpoint → when its path MTU was last set
	buf := make([]byte, header.ICMPv6ErrorMaxLen+header.IPv6Len)
	next := time.Now().Add(sweep)
	for {
		f.cfg.Source.SetReadDeadline(next)
		msg, from, err := f.cfg.Source.ReadMessage(buf)
		now := time.Now()
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrClosed) {
				f.cfg.Log.Warn("ICMPv6 packet too big no longer read", "err", err)
			}
			return
		}
		if err == nil {
			if dst, ok := f.take(msg, from); ok {
				set[dst] = now
			}
		}
		if now.Before(next) {
			continue
		}
		next = now.Add(sweep)
		for a, t := range set {
			if now.Sub(t) >= Expiry {
				f.cfg.Setter.SetPathMTU(a, 0)
				delete(set, a)
				f.cfg.Log.Info("path MTU toward an endpoint expired: full-size outer packets to it leave whole again", "endpoint", a)
			}
		}
	}
}

// take sets the path MTU msg, an ICMPv6 message from the router from,
// reports, when it is a "packet too big" about an outer packet of ours
// (Parse, Config.Ours) with an MTU below the WAN's, and logs a change. It
// returns the endpoint whose path MTU it set.
func (f *Follower) take(msg []byte, from netip.Addr) (dst netip.Addr, ok bool) {
	tb, ok := Parse(msg)
	if !ok || !f.cfg.Ours(tb.Src, tb.SrcPort) || tb.MTU >= f.cfg.WANMTU() {
		return dst, false
	}
	old := f.cfg.Setter.PathMTUs()[tb.Dst]
	if !f.cfg.Setter.SetPathMTU(tb.Dst, tb.MTU) {
		return dst, false
	}
	if got := f.cfg.Setter.PathMTUs()[tb.Dst]; got != old {
		f.cfg.Log.Info("path MTU toward an endpoint lowered by an ICMPv6 packet too big: outer packets to it larger than that leave as IPv6 fragments",
			"endpoint", tb.Dst, "path_mtu", got, "from", from, "expires_in", Expiry)
	}
	return tb.Dst, true
}
