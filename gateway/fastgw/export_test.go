package fastgw

import "github.com/vishvananda/netlink"

// SetSharedUMEMProbe replaces the shared-UMEM probe until restore is
// called.
func SetSharedUMEMProbe(probe func() error) (restore func()) {
	old := haveSharedUMEM
	haveSharedUMEM = probe
	return func() { haveSharedUMEM = old }
}

// EndFirstLinkSubscriptions makes the first n link subscriptions (the
// MTU watchers') end at once, as one ends when its socket overflows,
// until restore is called.
func EndFirstLinkSubscriptions(n int) (restore func()) {
	old := linkSubscribe
	linkSubscribe = func(ch chan<- netlink.LinkUpdate, done <-chan struct{}, opts netlink.LinkSubscribeOptions) error {
		if n > 0 {
			n--
			close(ch)
			return nil
		}
		return old(ch, done, opts)
	}
	return func() { linkSubscribe = old }
}
