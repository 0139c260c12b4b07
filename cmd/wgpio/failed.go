//go:build linux

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/device"

	"github.com/wgpio/wgpio/internal/linkfollow"
)

// logStopping logs why the gateway stops, as serve returned: the stop
// signal sig, or the gateway's failure (the gateway logged it already, at
// error level, with what it means).
func logStopping(log *slog.Logger, sig os.Signal, failed error) {
	if failed != nil {
		log.Info("stopping: the gateway failed; it exits with status 1 after a clean shutdown, for its service to start it again", "err", failed)
		return
	}
	log.Info("stopping", "signal", sig.String())
}

// exitError is what `wgpio up` returns once the gateway has shut down:
// its failure, if serve ended on one (main prints it and exits with
// status 1: dist/wgpio.service, Restart=on-failure, starts it again),
// else closeErr, Close's error. After a failure Close's error is logged at
// warning level only: what Close undoes on the interface deleted (RX
// VLAN offload turned back on, the XDP program detached) fails there
// with "no such device", and nothing is left of it.
func exitError(log *slog.Logger, failed, closeErr error) error {
	if failed == nil {
		return closeErr
	}
	if closeErr != nil {
		log.Warn("shutdown after the failure: some steps failed, as they do on an interface deleted", "err", closeErr)
	}
	return failed
}

// mqtunFailed is compat-mqtun's failure (signals.failed) until done is
// closed: stock wireguard-go closes its device when a read of its TUN
// fails, as it does once the TUN is deleted (ip link del NAME: the read
// answers EBADFD), and the process ran on without a tunnel, silently but
// for wireguard-go's line. The TUN deleted, a *linkfollow.GoneError is
// sent, and logged at error level; the device closed otherwise, an error
// saying so. The LAN and the WAN are no failure in this mode: its UDP
// sockets are the kernel's, bound to no interface, and the kernel routes
// between the LAN and the TUN, so a LAN or WAN deleted and created again
// carries the tunnel once its addresses and routes are back, as with
// Linux's wg0.
func mqtunFailed(log *slog.Logger, dev *device.Device, name string, done <-chan struct{}) <-chan error {
	c := make(chan error, 1)
	go func() {
		select {
		case <-done:
			return
		case <-dev.Wait():
		}
		select {
		case <-done: // closed before the shutdown closes the device
			return
		default:
		}
		var notFound netlink.LinkNotFoundError
		if _, err := netlink.LinkByName(name); errors.As(err, &notFound) {
			var f linkfollow.Failure
			f.Gone(log, &linkfollow.GoneError{What: "TUN", Name: name},
				"stock wireguard-go read the tunnel's packets from it and closed its device; stopping so that the service restarts the gateway, which creates it anew "+
					"(Linux's `ip link del wg0` ends its tunnel for good: stop the service for that)")
			c <- <-f.C()
			return
		}
		err := fmt.Errorf("wireguard-go closed its device %s (its TUN failed: see its error above)", name)
		log.Error(err.Error()+"; stopping so that the service restarts the gateway", "interface", name)
		c <- err
	}()
	return c
}
