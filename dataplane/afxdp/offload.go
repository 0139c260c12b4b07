//go:build linux

package afxdp

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrOtherDevice: the interface index of an OffloadChange now belongs to a
// device of another name and another MAC address than the one changed
// (that one is gone and the kernel gave its index to a new one), which
// RestoreOffload leaves alone.
var ErrOtherDevice = errors.New("afxdp: the interface index is another device's now")

// OffloadChange is a change Open makes to a device's features (RX VLAN
// offload, see Config.KeepRXVLANOffload) and Close undoes. The features
// are the host's, not the process's: a process that dies before Close
// (SIGKILL, a crash) leaves them changed, and no later Open can tell that
// they were ever different. An OffloadJournal keeps the change where it
// outlives the process, so that a later process undoes it with
// RestoreOffload.
type OffloadChange struct {
	// Netns is the inode of the network namespace the device was in at
	// Open (/proc/thread-self/ns/net, as `ip netns identify` compares
	// them), 0 if it could not be read.
	Netns uint64
	// Ifindex, Name and MAC are the device's at Open: RestoreOffload acts
	// on the device of index Ifindex, if it still has Name or MAC.
	Ifindex int
	Name    string
	MAC     net.HardwareAddr
	// Off lists the features Open turns off, by the kernel's names
	// (net/ethtool/common.c, netdev_features_strings: those of ethtool
	// -k, "rx-vlan-hw-parse"); undoing the change turns them on.
	Off []string
}

// OffloadJournal keeps the OffloadChanges of the ports opened with it
// (Config.Journal) while they are in effect. Its methods are called from
// Open and Close, for different ports concurrently.
type OffloadJournal interface {
	// Record is called before Open changes the device's features. An
	// error fails Open, the device unchanged.
	Record(OffloadChange) error
	// Forget is called once Close has undone the change recorded (or
	// tried to: Close returns the error), also when Open fails after
	// Record. Its argument is the change recorded, Off narrowed to the
	// features that were turned off.
	Forget(OffloadChange)
}

// RestoreOffload undoes c, a change recorded by a process that ended
// without closing its port: it turns c.Off on again on the device of
// index c.Ifindex in the calling thread's network namespace, which must
// be c.Netns. It refuses (ErrOtherDevice) a device there that has neither
// c.Name nor c.MAC, and returns an error wrapping ErrNoSuchInterface when
// no device has that index any more (its features went with it). It needs
// CAP_NET_ADMIN.
func RestoreOffload(c OffloadChange) error {
	runtime.LockOSThread() // the namespace checked is the one acted in
	defer runtime.UnlockOSThread()
	if ns := threadNetns(); c.Netns != 0 && ns != c.Netns {
		return fmt.Errorf("afxdp: %s (index %d) was changed in network namespace %d, and this is %d: restore it from there", c.Name, c.Ifindex, c.Netns, ns)
	}
	e, err := ethtool.NewEthtool()
	if err != nil {
		return fmt.Errorf("afxdp: ethtool socket: %w", err)
	}
	defer e.Close()
	return featuresOn(e, netlink.LinkByIndex, c)
}

// threadNetns is the inode of the calling thread's network namespace, 0
// if it cannot be read.
func threadNetns() uint64 {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return 0
	}
	return st.Ino
}

// featuresOn turns c.Off on through e on the device that byIndex finds
// at c.Ifindex, if it is still c's (its name or its MAC): by index, so
// that a device renamed since is still found and one that took the old
// name is not touched.
func featuresOn(e *ethtool.Ethtool, byIndex func(int) (netlink.Link, error), c OffloadChange) error {
	l, err := byIndex(c.Ifindex)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
			return fmt.Errorf("%w: index %d (%s was there) is gone, and %v with it", ErrNoSuchInterface, c.Ifindex, c.Name, c.Off)
		}
		return fmt.Errorf("afxdp: look up interface index %d (%s): %w", c.Ifindex, c.Name, err)
	}
	a := l.Attrs()
	if a.Name != c.Name && (len(c.MAC) == 0 || !bytes.Equal(a.HardwareAddr, c.MAC)) {
		return fmt.Errorf("%w: index %d is %s (MAC %s), the device changed was %s (MAC %s): %v left as they are there", ErrOtherDevice, c.Ifindex, a.Name, a.HardwareAddr, c.Name, c.MAC, c.Off)
	}
	if len(c.Off) == 0 {
		return nil
	}
	// Only what Open turns off: a record names features, and one edited
	// or corrupted turned on whatever it listed (rx-gro-hw, checksums).
	on := make(map[string]bool, len(c.Off))
	for _, f := range c.Off {
		if !slices.Contains(rxVLANFeatures, f) {
			return fmt.Errorf("afxdp: %s (index %d): %q is not a feature Open turns off (%v): the change is not one of ours", a.Name, c.Ifindex, f, rxVLANFeatures)
		}
		on[f] = true
	}
	if err := e.Change(a.Name, on); err != nil {
		return fmt.Errorf("%s (index %d): set %v on (by hand: ethtool -K %s %s): %w", a.Name, c.Ifindex, c.Off, a.Name, ethtoolOnArgs(c.Off), err)
	}
	return nil
}

// ethtoolOnArgs are the ethtool -K arguments that turn features on.
func ethtoolOnArgs(features []string) string {
	var b []byte
	for i, f := range slices.Sorted(slices.Values(features)) {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, f+" on"...)
	}
	return string(b)
}
