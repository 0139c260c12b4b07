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

// signals are the signals a running gateway acts on: stop receives
// SIGINT and SIGTERM, reload SIGHUP. They are registered before the
// gateway starts (notifySignals), so that one sent while it starts waits
// for serve instead of ending the process half set up, as Go's default
// does. Each has its own channel: signal.Notify drops a signal its
// channel has no room for, and in one channel a SIGHUP waiting while a
// reload ran left no room for a SIGTERM (systemctl reload, then stop),
// which was lost. SIGHUPs waiting together are one reload: it reads the
// file as it is then.
type signals struct{ stop, reload chan os.Signal }

// notifySignals registers the signals of serve; for the life of the
// process.
func notifySignals() signals {
	s := signals{stop: make(chan os.Signal, 1), reload: make(chan os.Signal, 1)}
	signal.Notify(s.stop, syscall.SIGINT, syscall.SIGTERM)
	signal.Notify(s.reload, syscall.SIGHUP)
	return s
}

// loaded is the outcome of reading the configuration file for a reload.
type loaded struct {
	f   *config.File
	err error
}

// serve waits for SIGINT or SIGTERM and returns it; each SIGHUP meanwhile
// reloads the configuration file path into dev (reload). Without this,
// SIGHUP (`systemctl reload`, `kill -HUP`, a closed terminal) ended the
// process at once, as Go's default does, without the shutdown SIGTERM gets
// (XDP programs detached, RX VLAN offload restored, sockets removed).
//
// The file is read on a goroutine of its own, and applied on serve's: a
// read that does not end (the path made a FIFO, a hung network file
// system) neither delays a stop nor races one. A SIGHUP during a read
// reads the file again after it, as it may have changed since the read
// began. A stop waiting is served before anything else; a read still
// running then is left, and its key erased when it ends.
func serve(log *slog.Logger, path string, dev uapiDevice, sigs signals) os.Signal {
	results := make(chan loaded, 1)
	reading, again := false, false
	read := func() {
		reading = true
		go func() {
			f, err := config.Load(path)
			results <- loaded{f, err}
		}()
	}
	defer func() {
		if reading {
			go func() {
				if r := <-results; r.f != nil {
					r.f.Interface.PrivateKey.Zero()
				}
			}()
		}
	}()
	for {
		select {
		case sig := <-sigs.stop:
			return sig
		default:
		}
		select {
		case sig := <-sigs.stop:
			return sig
		case <-sigs.reload:
			if reading {
				again = true
				continue
			}
			read()
		case r := <-results:
			reading = false
			if r.err == nil {
				r.err = apply(r.f, dev)
			}
			if r.err != nil {
				log.Error("reload: configuration not applied; the gateway runs on as it was", "file", path, "err", r.err)
			} else {
				log.Info("reload: peers, PrivateKey, ListenPort and FwMark applied as wg syncconf applies them; Address, MTU and [WGPIO] take effect at the next start", "file", path)
			}
			if again {
				again = false
				read()
			}
		}
	}
}

// apply applies f to dev as `wg syncconf NAME <(wgpio strip FILE)` does
// (config.File.SyncUAPI): the peers it lists are set, the sessions of
// those unchanged go on, the others are removed. It erases f's private
// key.
func apply(f *config.File, dev uapiDevice) error {
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
