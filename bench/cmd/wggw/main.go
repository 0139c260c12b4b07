//go:build linux

package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/wgpio/wgpio/tundev"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
)

func main() {
	name := flag.String("tun", "wg0", "TUN interface name")
	mtu := flag.Int("mtu", 1420, "TUN MTU in bytes")
	queues := flag.Int("queues", 0, "0: wireguard-go's kernel TUN; N>0: wgpio multi-queue TUN with N queues")
	uapi := flag.String("uapi", "", "file holding a UAPI set=1 body (private_key=..., peers)")
	verbose := flag.Bool("v", false, "verbose wireguard-go log")
	flag.Parse()
	if err := run(*name, *mtu, *queues, *uapi, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "wggw:", err)
		os.Exit(1)
	}
}

func run(name string, mtu, queues int, uapiPath string, verbose bool) error {
	conf, err := os.ReadFile(uapiPath)
	if err != nil {
		return fmt.Errorf("read uapi config: %w", err)
	}
	var dev tun.Device
	if queues > 0 {
		dev, err = tundev.OpenMultiQueueTUN(name, queues, mtu)
	} else {
		dev, err = tun.CreateTUN(name, mtu)
	}
	if err != nil {
		return fmt.Errorf("create tun %s: %w", name, err)
	}
	level := device.LogLevelError
	if verbose {
		level = device.LogLevelVerbose
	}
	d := device.NewDevice(dev, conn.NewDefaultBind(), device.NewLogger(level, "("+name+") "))
	defer d.Close()
	if err := d.IpcSet(string(conf)); err != nil {
		return fmt.Errorf("apply uapi config: %w", err)
	}
	if err := d.Up(); err != nil {
		return fmt.Errorf("device up: %w", err)
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-sig:
	case <-d.Wait():
	}
	return nil
}
