//go:build !linux

package arp

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"

	"github.com/vishvananda/netns"
)

var errNotImplemented = fmt.Errorf("arp: not implemented on %s", runtime.GOOS)

// KernelOptions say which kernel tables the shared-mode readers follow.
type KernelOptions struct {
	Namespace     netns.NsHandle
	LinkIndex     int
	ErrorCallback func(error)
}

// KernelRoutes reads the kernel's routes (Linux only).
type KernelRoutes struct{ Updates, Listings atomic.Uint64 }

// NewKernelRoutes returns an error: not implemented on this system.
func NewKernelRoutes(KernelOptions) (*KernelRoutes, error) { return nil, errNotImplemented }

// NextHop implements Resolver; it never finds a route.
func (*KernelRoutes) NextHop(netip.Addr) (netip.Addr, int, bool) { return netip.Addr{}, 0, false }

// Route never finds a route.
func (*KernelRoutes) Route(netip.Addr) (Route, bool) { return Route{}, false }

// Table holds no route.
func (*KernelRoutes) Table() RouteTable { return RouteTable{} }

// Ignore does nothing.
func (*KernelRoutes) Ignore(int) {}

// Close does nothing.
func (*KernelRoutes) Close() error { return nil }

// KernelNeighbours mirrors the kernel's neighbours (Linux only).
type KernelNeighbours struct{ Updates atomic.Uint64 }

// NewKernelNeighbours returns an error: not implemented on this system.
func NewKernelNeighbours(*Table, KernelOptions) (*KernelNeighbours, error) {
	return nil, errNotImplemented
}

// Close does nothing.
func (*KernelNeighbours) Close() error { return nil }

// JoinGroup returns an error: not implemented on this system.
func JoinGroup(string, netip.Addr) error { return errNotImplemented }

// LeaveGroup returns an error: not implemented on this system.
func LeaveGroup(string, netip.Addr) error { return errNotImplemented }

// Membership holds multicast group memberships (Linux only).
type Membership struct{}

// JoinGroups returns an error: not implemented on this system.
func JoinGroups(string, []netip.Addr) (*Membership, error) { return nil, errNotImplemented }

// JoinGroupsLinkLayer returns an error: not implemented on this system.
func JoinGroupsLinkLayer(string, []netip.Addr) (*Membership, error) { return nil, errNotImplemented }

// LinkOnly returns nil.
func (*Membership) LinkOnly() []netip.Addr { return nil }

// Close does nothing.
func (*Membership) Close() error { return nil }
