// Package downdev makes stock wireguard-go devices that stay down, for
// tests of what reads or writes a device's configuration (UAPI, set
// followers) without a network: the device's TUN (tun/tuntest's channel
// TUN) never reports tun.EventUp, so its bind (the standard one, which
// prints endpoints as they were given, where conn/bindtest's print as
// 127.0.0.1) is never opened, no peer is started and nothing is sent.
package downdev

import (
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
	"golang.zx2c4.com/wireguard/tun/tuntest"
)

// New returns a device that stays down, logging nothing. The caller
// closes it; its goroutines end then (the TUN's event channel closes).
func New() *device.Device {
	t := &downTUN{Device: tuntest.NewChannelTUN().TUN(), events: make(chan tun.Event)}
	return device.NewDevice(t, conn.NewStdNetBind(), device.NewLogger(device.LogLevelSilent, ""))
}

// downTUN is a channel TUN whose events never say up.
type downTUN struct {
	tun.Device
	events chan tun.Event
}

func (d *downTUN) Events() <-chan tun.Event { return d.events }

func (d *downTUN) Close() error {
	err := d.Device.Close()
	close(d.events)
	return err
}
