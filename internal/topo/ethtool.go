package topo

import (
	"fmt"

	"github.com/wgpio/wgpio/internal/ethtool"
)

// SetTXChecksum turns TX checksum offload of dev (in the namespace) on or
// off through the kernel's ethtool ioctl, as `ethtool -K dev tx off` does,
// without the ethtool binary.
func (n *NS) SetTXChecksum(dev string, on bool) error {
	err := n.Do(func() error {
		h, err := ethtool.Open()
		if err != nil {
			return err
		}
		defer h.Close()
		return h.SetTXChecksum(dev, on)
	})
	if err != nil {
		return fmt.Errorf("in %s: %w", n.Name, err)
	}
	return nil
}

// TXChecksum reports whether TX checksum offload is on for dev in the
// namespace.
func (n *NS) TXChecksum(dev string) (on bool, err error) {
	err = n.Do(func() error {
		h, err := ethtool.Open()
		if err != nil {
			return err
		}
		defer h.Close()
		on, err = h.TXChecksum(dev)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("in %s: %w", n.Name, err)
	}
	return on, nil
}
