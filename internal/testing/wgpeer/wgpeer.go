//go:build linux

package wgpeer

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"
	"golang.zx2c4.com/wireguard/tun"

	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/tundev"
)

// Peer is one peer of the stock device.
type Peer struct {
	PublicKey  [32]byte
	Endpoint   netip.AddrPort // invalid: none
	AllowedIPs []netip.Prefix
	Keepalive  int // seconds, 0 off
}

// Config configures a stock wireguard-go device.
type Config struct {
	// Name of the TUN interface and the UAPI socket (unique on the host).
	Name       string
	PrivateKey [32]byte
	ListenPort uint16
	MTU        int // default 1420
	// Address is put on the TUN (CIDR); Routes are routed into it.
	Address netip.Prefix
	Routes  []netip.Prefix
	Peers   []Peer
	// Queues > 0 uses wgpio's multi-queue kernel TUN with that many
	// queues instead of wireguard-go's own TUN.
	Queues int
}

// Device is a running stock wireguard-go device.
type Device struct {
	Dev  *device.Device
	uapi net.Listener
	ns   *topo.NS
	name string
	port uint16 // Config.ListenPort
}

// UAPIConfig renders cfg as a UAPI set body (hex keys).
func UAPIConfig(cfg Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "private_key=%s\n", hex.EncodeToString(cfg.PrivateKey[:]))
	if cfg.ListenPort != 0 {
		fmt.Fprintf(&b, "listen_port=%d\n", cfg.ListenPort)
	}
	b.WriteString("replace_peers=true\n")
	for _, p := range cfg.Peers {
		fmt.Fprintf(&b, "public_key=%s\n", hex.EncodeToString(p.PublicKey[:]))
		if p.Endpoint.IsValid() {
			fmt.Fprintf(&b, "endpoint=%s\n", p.Endpoint)
		}
		if p.Keepalive > 0 {
			fmt.Fprintf(&b, "persistent_keepalive_interval=%d\n", p.Keepalive)
		}
		b.WriteString("replace_allowed_ips=true\n")
		for _, a := range p.AllowedIPs {
			fmt.Fprintf(&b, "allowed_ip=%s\n", a)
		}
	}
	return b.String()
}

// Start runs the device inside ns. Sockets and the TUN are made on a thread
// inside ns and stay there.
func Start(ns *topo.NS, cfg Config) (*Device, error) {
	if cfg.MTU == 0 {
		cfg.MTU = 1420
	}
	d := &Device{ns: ns, name: cfg.Name, port: cfg.ListenPort}
	err := ns.Do(func() error {
		var t tun.Device
		var err error
		if cfg.Queues > 0 {
			t, err = tundev.OpenMultiQueueTUN(cfg.Name, cfg.Queues, cfg.MTU)
		} else {
			t, err = tun.CreateTUN(cfg.Name, cfg.MTU)
		}
		if err != nil {
			return fmt.Errorf("wgpeer: create TUN %s: %w", cfg.Name, err)
		}
		// Silent: in a namespace, wireguard-go's TUN MTU watcher looks the
		// interface up from another thread and logs a harmless error.
		logger := device.NewLogger(device.LogLevelSilent, "")
		// wireguard-go (re)opens its bind from whatever goroutine handles
		// a TUN event: open it inside the namespace every time.
		d.Dev = device.NewDevice(t, &nsBind{Bind: conn.NewDefaultBind(), ns: ns}, logger)
		if err := d.Dev.IpcSet(UAPIConfig(cfg)); err != nil {
			d.Dev.Close()
			return fmt.Errorf("wgpeer: configure: %w", err)
		}
		if err := d.Dev.Up(); err != nil {
			d.Dev.Close()
			return fmt.Errorf("wgpeer: up: %w", err)
		}
		f, err := ipc.UAPIOpen(cfg.Name)
		if err != nil {
			d.Dev.Close()
			return fmt.Errorf("wgpeer: UAPI socket: %w", err)
		}
		d.uapi, err = ipc.UAPIListen(cfg.Name, f)
		if err != nil {
			d.Dev.Close()
			return fmt.Errorf("wgpeer: UAPI listen: %w", err)
		}
		go func() {
			for {
				c, err := d.uapi.Accept()
				if err != nil {
					return
				}
				go d.Dev.IpcHandle(c)
			}
		}()
		return nil
	})
	if err != nil {
		return nil, err
	}
	if cfg.Address.IsValid() {
		if err := ns.AddAddr(cfg.Name, cfg.Address.String()); err != nil {
			d.Close()
			return nil, err
		}
	}
	if err := ns.LinkUp(cfg.Name); err != nil {
		d.Close()
		return nil, err
	}
	for _, r := range cfg.Routes {
		if err := ns.AddRoute(r.String(), "", cfg.Name); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// PinBind makes sure the device's UDP socket lives in its namespace.
// Bringing the TUN up after device.Up makes wireguard-go handle a TUN event
// (device/tun.go: EventUp → Device.Up → BindUpdate) on a goroutine whose OS
// thread may be in any namespace, so the socket is sometimes reopened
// outside, and the peer never answers. PinBind reopens it from inside the
// namespace until it stays there (a few seconds at most) and returns an
// error if it does not. It needs Config.ListenPort.
func (d *Device) PinBind() error {
	if d.port == 0 {
		return errors.New("wgpeer: PinBind needs a ListenPort")
	}
	port := strconv.Itoa(int(d.port))
	listening := func() bool {
		out, err := d.ns.Run("ss", "-Huln", "sport", "= :"+port)
		return err == nil && strings.Contains(out, port)
	}
	for range 20 {
		time.Sleep(100 * time.Millisecond)
		if listening() {
			time.Sleep(200 * time.Millisecond)
			if listening() {
				return nil
			}
		}
		if err := d.ns.Do(d.Dev.BindUpdate); err != nil {
			return fmt.Errorf("wgpeer: reopen the bind in %s: %w", d.ns.Name, err)
		}
	}
	return fmt.Errorf("wgpeer: the UDP socket of %s is not in %s", d.name, d.ns.Name)
}

// Close stops the device and removes its UAPI socket.
func (d *Device) Close() {
	if d.uapi != nil {
		d.uapi.Close()
	}
	if d.Dev != nil {
		d.Dev.Close()
	}
}

// nsBind opens a standard bind's sockets inside a namespace, whatever
// goroutine (and so OS thread) wireguard-go calls Open from.
type nsBind struct {
	conn.Bind
	ns *topo.NS
}

// Open implements conn.Bind.
func (b *nsBind) Open(port uint16) (fns []conn.ReceiveFunc, actual uint16, err error) {
	err = b.ns.Do(func() error {
		var err error
		fns, actual, err = b.Bind.Open(port)
		return err
	})
	return fns, actual, err
}
