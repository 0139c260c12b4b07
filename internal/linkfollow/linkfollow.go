//go:build linux

package linkfollow

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
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
}

// Follow calls cfg.OnLink as Config says until done is closed. When the
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
		for {
			for _, i := range cfg.Indexes {
				if l, err := cfg.Links.LinkByIndex(i); err == nil {
					cfg.OnLink(*l.Attrs(), true)
				}
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
				if i := u.Attrs().Index; slices.Contains(cfg.Indexes, i) {
					if l, err := cfg.Links.LinkByIndex(i); err == nil {
						cfg.OnLink(*l.Attrs(), false)
					}
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
