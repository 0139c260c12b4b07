package srcaddr

import "golang.org/x/sys/unix"

// Use is how an IPv6 address may be used as a source.
type Use int

const (
	Preferred  Use = iota // use it
	Deprecated            // use it when no Preferred address exists
	Unusable              // tentative or failed duplicate address detection
)

// IPv6 judges an IPv6 address by its IFA_F_* flags (netlink.Addr.Flags).
// When a tentative address's detection ends, the kernel announces it
// again (RTM_NEWADDR), and an address follower reads it then.
func IPv6(flags int) Use {
	switch {
	case flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) != 0:
		return Unusable
	case flags&unix.IFA_F_DEPRECATED != 0:
		return Deprecated
	}
	return Preferred
}
