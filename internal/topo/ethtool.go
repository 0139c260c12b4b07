//go:build linux

package topo

import (
	"fmt"
	"strings"

	"github.com/safchain/ethtool"
)

// txChecksumPrefix names the features `ethtool -K dev tx off` (and the
// kernel's ETHTOOL_STXCSUM) turn off together: tx-checksum-ipv4,
// -ip-generic, -ipv6, -fcoe-crc and -sctp (net/ethtool/common.c,
// netdev_features_strings; NETIF_F_CSUM_MASK and the CRC offloads).
const txChecksumPrefix = "tx-checksum-"

// SetTXChecksum turns TX checksum offload of dev (in the namespace) on or
// off, as `ethtool -K dev tx off` does, without the ethtool binary: every
// changeable tx-checksum-* feature at once. It fails if the device has
// none or keeps the old state.
func (n *NS) SetTXChecksum(dev string, on bool) error {
	err := n.Do(func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return fmt.Errorf("ethtool socket: %w", err)
		}
		defer e.Close()
		fs, err := e.FeaturesWithState(dev)
		if err != nil {
			return fmt.Errorf("%s: read features: %w", dev, err)
		}
		change := make(map[string]bool)
		for name, f := range fs {
			if strings.HasPrefix(name, txChecksumPrefix) && f.Available {
				change[name] = on
			}
		}
		if len(change) == 0 {
			return fmt.Errorf("%s: no changeable TX checksum offload", dev)
		}
		if err := e.Change(dev, change); err != nil {
			return fmt.Errorf("%s: set TX checksumming %v: %w", dev, on, err)
		}
		if now, err := txChecksum(e, dev); err != nil || now != on {
			return fmt.Errorf("%s: set TX checksumming %v: the device keeps it %v (%v)", dev, on, now, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("in %s: %w", n.Name, err)
	}
	return nil
}

// TXChecksum reports whether TX checksum offload is on for dev in the
// namespace (any tx-checksum-* feature active, as ETHTOOL_GTXCSUM says).
func (n *NS) TXChecksum(dev string) (on bool, err error) {
	err = n.Do(func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return fmt.Errorf("ethtool socket: %w", err)
		}
		defer e.Close()
		on, err = txChecksum(e, dev)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("in %s: %w", n.Name, err)
	}
	return on, nil
}

func txChecksum(e *ethtool.Ethtool, dev string) (bool, error) {
	fs, err := e.Features(dev)
	if err != nil {
		return false, fmt.Errorf("%s: read features: %w", dev, err)
	}
	for name, on := range fs {
		if on && strings.HasPrefix(name, txChecksumPrefix) {
			return true, nil
		}
	}
	return false, nil
}

// Features returns the features of dev (in the namespace), on or off, by
// the kernel's names (net/ethtool/common.c, netdev_features_strings: those
// `ethtool -k dev` lists, "rx-vlan-hw-parse"), without the ethtool binary.
func (n *NS) Features(dev string) (map[string]bool, error) {
	var fs map[string]bool
	err := n.Do(func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return fmt.Errorf("ethtool socket: %w", err)
		}
		defer e.Close()
		if fs, err = e.Features(dev); err != nil {
			return fmt.Errorf("%s: read features: %w", dev, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("in %s: %w", n.Name, err)
	}
	return fs, nil
}

// SetFeatures turns features of dev (in the namespace) on (true) or off,
// by the kernel's names, as `ethtool -K dev NAME on|off` does.
func (n *NS) SetFeatures(dev string, change map[string]bool) error {
	err := n.Do(func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return fmt.Errorf("ethtool socket: %w", err)
		}
		defer e.Close()
		if err := e.Change(dev, change); err != nil {
			return fmt.Errorf("%s: set features %v: %w", dev, change, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("in %s: %w", n.Name, err)
	}
	return nil
}
