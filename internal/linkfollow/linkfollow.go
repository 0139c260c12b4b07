//go:build linux

package linkfollow

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ResubscribeDelay is how long Follow waits before subscribing again after
// its subscription ended on an error.
const ResubscribeDelay = time.Second

// Subscribe is netlink's LinkSubscribeWithOptions; tests replace it (before
// any Follow) to end subscriptions early.
var Subscribe = netlink.LinkSubscribeWithOptions

// Config says what Follow follows and whom it tells.
type Config struct {
	// Namespace is the network namespace whose links are followed. Not
	// open (netns.None(); the zero value is descriptor 0, which counts as
	// open): the namespace of the thread that subscribes, Follow's caller
	// at first but its goroutine's after a renewal, so only for a process
	// whose threads all are in it (threadns.Moved returns one or the
	// other).
	Namespace netns.NsHandle
	// Links reads the links, in that namespace. The caller keeps it open
	// until Follow's goroutine has ended (the WaitGroup), and uses it on
	// no other goroutine meanwhile unless netlink allows that for its
	// calls.
	Links *netlink.Handle
	// Log receives the subscription's errors (warning) and renewals
	// (info).
	Log *slog.Logger
	// What names the followed side in the log: "WAN", "LAN",
	// "exception TUN".
	What string
	// Indexes are the interface indexes followed.
	Indexes []int
	// OnLink is called, on Follow's goroutine, with the attributes of
	// each interface of Indexes read anew after each subscription
	// (reread true: a change made before it is not missed, but changes
	// made and undone while no subscription listened are not seen, and
	// OnLink may have to check what they may have left) and at each link
	// update of one of them (reread false).
	OnLink func(a netlink.LinkAttrs, reread bool)
	// OnGone, if not nil, is called on Follow's goroutine, once per
	// interface of Indexes, when that interface is found gone from the
	// namespace: deleted (ip link del, a NIC unplugged, a veth's peer
	// namespace removed) or moved to another namespace. Found by its
	// RTM_DELLINK update (not the AF_BRIDGE one a bridge sends when the
	// interface leaves it: the interface stays), or by LinkByIndex
	// answering netlink.LinkNotFoundError when it is read (after a
	// subscription, so a deletion while none listened is found too).
	// name is the interface's name as last seen (the update's, or the
	// last read's), "" if Follow never saw it. The index is then
	// followed no more: neither OnLink nor OnGone is called for it again,
	// even if a new interface takes the index.
	OnGone func(index int, name string)
}

// Follow calls cfg.OnLink (and cfg.OnGone) as Config says until done is
// closed. When the
// subscription ends on an error (its socket overflowed in a burst of link
// events: ENOBUFS), the error is logged, the ended subscription's socket
// closed (netlink closes it only at the subscription's end: one was kept
// per renewal otherwise), and Follow subscribes again after
// ResubscribeDelay; only the end at done is silent. It returns the first
// subscription's error, wrapped ("follow the LAN link: ..."), with no
// goroutine left. Otherwise the goroutine it starts is counted in wg
// (Add before Follow returns, Done when it has ended after done was
// closed): the caller waits for wg before closing cfg.Links.
func Follow(cfg Config, done <-chan struct{}, wg *sync.WaitGroup) error {
	ch, end, err := subscribe(cfg)
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			if end != nil { // nil: done closed while subscribing again
				end()
				// netlink's reader may be waiting to hand over an
				// update: taken, it finds its socket closed and
				// closes ch.
				for range ch {
				}
			}
		}()
		f := newFollowed(cfg)
		for {
			for _, i := range cfg.Indexes {
				f.read(i, true)
			}
		updates:
			for {
				var u netlink.LinkUpdate
				var ok bool
				select {
				case <-done:
					return
				case u, ok = <-ch:
				}
				if !ok {
					break updates
				}
				// The link as it is now, not as the update says it
				// was: updates queued while the state above was read
				// are older than it, and taken as they are they turned
				// a followed MTU back for a moment (and logged it).
				i := u.Attrs().Index
				switch {
				case !slices.Contains(cfg.Indexes, i):
				case u.Header.Type == unix.RTM_DELLINK && u.Family != unix.AF_BRIDGE:
					f.gone(i, u.Attrs().Name)
				default:
					f.read(i, false)
				}
			}
			end()
			for ch, end = nil, nil; ch == nil; {
				select {
				case <-done:
					return
				case <-time.After(ResubscribeDelay):
				}
				if ch, end, err = subscribe(cfg); err != nil {
					cfg.Log.Warn("following the "+cfg.What+" link: subscribe again", "err", err)
				} else {
					cfg.Log.Info("following the " + cfg.What + " link again after its subscription ended")
				}
			}
		}
	}()
	return nil
}

// followed is what Follow's goroutine knows of the interfaces it follows:
// their names as last seen and those found gone. Its goroutine's alone.
type followed struct {
	cfg   Config
	names map[int]string
	lost  map[int]bool
}

func newFollowed(cfg Config) *followed {
	return &followed{cfg: cfg, names: map[int]string{}, lost: map[int]bool{}}
}

// read reads the interface index and hands it to OnLink, or to gone if
// netlink finds no such interface. Another error of the read (the
// request failed) skips it, as before: the next update or subscription
// reads it again.
func (f *followed) read(index int, reread bool) {
	if f.lost[index] {
		return
	}
	l, err := f.cfg.Links.LinkByIndex(index)
	var notFound netlink.LinkNotFoundError
	switch {
	case err == nil:
		f.names[index] = l.Attrs().Name
		f.cfg.OnLink(*l.Attrs(), reread)
	case errors.As(err, &notFound):
		f.gone(index, "")
	}
}

// gone reports the interface index gone (Config.OnGone), once; name, if
// not "", is the name its deletion's update gave.
func (f *followed) gone(index int, name string) {
	if f.lost[index] {
		return
	}
	f.lost[index] = true
	if name == "" {
		name = f.names[index]
	}
	if f.cfg.OnGone != nil {
		f.cfg.OnGone(index, name)
	}
}

// subscribe subscribes to the link updates of cfg.Namespace until end is
// called: an error of the subscription is logged at warning level, but
// not the one end causes. end closes the subscription's netlink socket,
// which netlink (v1.3.1) keeps open after an error that ended the
// subscription until then: it must be called once, also after the
// updates channel closed.
func subscribe(cfg Config) (updates <-chan netlink.LinkUpdate, end func(), err error) {
	ch := make(chan netlink.LinkUpdate, 16)
	stop := make(chan struct{})
	opts := netlink.LinkSubscribeOptions{ErrorCallback: func(err error) {
		select {
		case <-stop: // closing the subscription fails its pending receive
		default:
			cfg.Log.Warn("following the "+cfg.What+" link", "err", err)
		}
	}}
	if ns := cfg.Namespace; ns.IsOpen() {
		opts.Namespace = &ns
	}
	if err := Subscribe(ch, stop, opts); err != nil {
		close(stop)
		return nil, nil, fmt.Errorf("follow the %s link: %w", cfg.What, err)
	}
	return ch, func() { close(stop) }, nil
}
