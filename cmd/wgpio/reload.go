package main

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/wgpio/wgpio/config"
)

// uapiDevice is the configuration protocol of a running gateway, whichever
// the mode: get returns the body of a "get=1" reply, set applies the body
// of a "set=1" operation.
type uapiDevice struct {
	get func() (string, error)
	set func(body string) error
}

// serve waits for SIGINT or SIGTERM and returns it; each SIGHUP meanwhile
// reloads the configuration file path into dev (reload). Without this,
// SIGHUP (`systemctl reload`, `kill -HUP`, a closed terminal) ended the
// process at once, as Go's default does, without the shutdown SIGTERM gets
// (XDP programs detached, RX VLAN offload restored, sockets removed).
func serve(log *slog.Logger, path string, dev uapiDevice) os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	for {
		sig := <-ch
		if sig != syscall.SIGHUP {
			return sig
		}
		if err := reload(path, dev); err != nil {
			log.Error("reload: configuration not applied; the gateway runs on as it was", "file", path, "err", err)
			continue
		}
		log.Info("reload: peers, PrivateKey, ListenPort and FwMark applied as wg syncconf applies them; Address, MTU and [WGPIO] take effect at the next start", "file", path)
	}
}

// reload applies the file at path to dev as `wg syncconf NAME <(wgpio
// strip FILE)` does (config.File.SyncUAPI): the peers it lists are set,
// the sessions of those unchanged go on, the others are removed. A file
// that does not parse changes nothing.
func reload(path string, dev uapiDevice) error {
	f, err := config.Load(path)
	if err != nil {
		return err
	}
	defer f.Interface.PrivateKey.Zero()
	cur, err := dev.get()
	if err != nil {
		return fmt.Errorf("read the running configuration: %w", err)
	}
	var running []string
	sc := bufio.NewScanner(strings.NewReader(cur))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if k, ok := strings.CutPrefix(sc.Text(), "public_key="); ok {
			running = append(running, k)
		}
	}
	// The body holds the private key, in a string nothing can erase,
	// as every UAPI request through the socket does.
	return dev.set(f.SyncUAPI(running))
}
