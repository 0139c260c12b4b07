//go:build linux

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/icmprate"
)

// uapiDevice is the configuration protocol of a running gateway, whichever
// the mode: get returns the body of a "get=1" reply, set applies the body
// of a "set=1" operation.
type uapiDevice struct {
	get func() (string, error)
	set func(body string) error
	// update, when set, does get, edit and set with no other set
	// request in between (gateway.Device.IpcUpdate); else apply calls
	// get then set (wireguard-go's device applies each set whole).
	update func(edit func(running string) (string, error)) error
}

// signals are the signals a running gateway acts on: stop receives
// SIGINT and SIGTERM, reload SIGHUP. They are registered before the
// gateway starts (notifySignals), so that one sent while it starts waits
// for serve instead of ending the process half set up, as Go's default
// does. Each has its own channel: signal.Notify drops a signal its
// channel has no room for, and in one channel a SIGHUP waiting while a
// reload ran left no room for a SIGTERM (systemctl reload, then stop),
// which was lost. SIGHUPs waiting together are one reload: it reads the
// file as it is then. While the gateway starts, watchStart reads stop, so
// that a second stop signal aborts a start that hangs; serve ends that
// watch (started) before it reads stop itself.
type signals struct {
	stop, reload chan os.Signal
	// failed, if not nil, is the running gateway's failure (its
	// Failed: an interface it runs on deleted; gatewayFailed), set once
	// the gateway started: serve stops on it as on a stop signal, and
	// `wgpio up` exits with it, status 1, after the same shutdown.
	failed <-chan error
	// started, if not nil, ends the watch of the start (watchStart);
	// safe to call more than once.
	started func()
	// nextStart, if not nil, checks a reloaded file as `wgpio up` would
	// at its next start, with the same flags (checkSystem): serve warns
	// of its error when the reload changed keys only a start applies.
	nextStart func(*config.File) error
	// checkFile, if not nil, checks a reloaded file as `wgpio check`
	// does, with the same flags (the file alone: checkFile): serve
	// applies none it refuses, as `systemctl reload` (ExecReload runs
	// wgpio check first) applies none.
	checkFile func(*config.File) error
}

// notifySignals registers the signals of serve; for the life of the
// process. reload, if not nil, is notifyReload's channel, registered
// earlier; nil registers SIGHUP now.
func notifySignals(reload chan os.Signal) signals {
	if reload == nil {
		reload = notifyReload()
	}
	s := signals{stop: make(chan os.Signal, 1), reload: reload}
	signal.Notify(s.stop, syscall.SIGINT, syscall.SIGTERM)
	return s
}

// notifyReload registers SIGHUP for serve (signals.reload). `wgpio up`
// calls it first, before it reads its file: Go's default for a SIGHUP
// ends the process, and a unit of Type=simple lets `systemctl reload` send
// one as soon as the process exists, so a reload right after a start
// ended the gateway (as a clean exit, which Restart=on-failure does not
// restart). Registered, the SIGHUP waits for serve, which reads the file
// again. (dist/wgpio.service is of Type=notify: systemd holds a reload
// until serve says the gateway is ready, which also covers the signals
// sent before main runs.) SIGINT and SIGTERM keep their default until notifySignals:
// before the start begins they end the process at once.
func notifyReload() chan os.Signal {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP)
	return c
}

// survivePipe asks for SIGPIPE, for the life of the process, and drops
// it (the channel is never read): a write to a stdout or stderr whose
// reader went away (`wgpio up ... 2>&1 | head`, a tee that died) then
// fails with EPIPE, and the log handler drops that line, where Go's
// default killed the gateway at its next log line, with its users'
// traffic (os/signal, "SIGPIPE"). As the demo does (cmdDemo); asked for,
// SIGPIPE comes for a write to any broken socket too (a capture client
// gone), where the write fails with EPIPE as well.
func survivePipe() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

// watchStart reads stop while the gateway starts, until the returned
// started is called (by serve, once the gateway runs, or by the caller
// when the start failed; more calls do nothing). The first stop signal
// meanwhile is logged and held: started puts it back on stop, where serve
// finds it at once and shuts the gateway down cleanly, which needs the
// start to have finished. A second one calls abort with it, for a start
// that hangs (a device or a netlink request that does not answer), which
// signal.Notify's channel of one place would otherwise drop, leaving
// only SIGKILL. abort is expected to end the process (abortStart); the
// watch ends when it returns.
func watchStart(log *slog.Logger, stop chan os.Signal, abort func(os.Signal)) (started func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		var first os.Signal
		for {
			select {
			case sig := <-stop:
				if first == nil {
					first = sig
					log.Warn("stop requested while the gateway starts: it stops cleanly once started; send the signal again to abort the start now", "signal", sig.String())
					continue
				}
				abort(sig)
				return
			case <-done:
				if first != nil {
					select {
					case stop <- first:
					default: // another stop signal already waits there
					}
				}
				return
			}
		}
	}()
	return sync.OnceFunc(func() {
		close(done)
		<-ended
	})
}

// abortStart is watchStart's abort for `wgpio up`: it logs why and what a
// start cut short leaves behind (as SIGKILL does: no XDP program stays
// attached and the exception TUN goes with the process, but its socket
// files stay until the next start replaces them, and RX VLAN offload
// stays off until the next start turns it back on: restoreOffloads), and
// exits with status 1.
func abortStart(log *slog.Logger) func(os.Signal) {
	return func(sig os.Signal) {
		log.Error("second stop signal while the gateway starts: start aborted; "+
			"its socket files stay until the next start replaces them, and RX VLAN offload stays off where it was turned off until the next start turns it back on (or ethtool -K DEV rxvlan on)",
			"signal", sig.String())
		os.Exit(1)
	}
}

// loaded is the outcome of reading the configuration file for a reload.
type loaded struct {
	f   *config.File
	err error
}

// serve waits for SIGINT or SIGTERM and returns it, or for the gateway's
// failure (sigs.failed) and returns that (sig nil); each SIGHUP meanwhile
// reloads the configuration file started.Name into dev (apply) and logs
// the file's warnings and what it applied: the peers added, removed and
// kept, and the keys of the file that differ from those the gateway
// started with but take effect only at the next start. started is the file as loaded at start, before
// the command line's overrides. Each reload's outcome goes to st (nil:
// none), which /metrics exports. Without this, SIGHUP (`systemctl reload`,
// `kill -HUP`, a closed terminal) ended the process at once, as Go's
// default does, without the shutdown SIGTERM gets (XDP programs detached,
// RX VLAN offload restored, sockets removed).
//
// The file is read on a goroutine of its own, and applied on serve's: a
// read that does not end (the path made a FIFO, a hung network file
// system) neither delays a stop nor races one. A SIGHUP during a read
// reads the file again after it, as it may have changed since the read
// began. A stop or a failure waiting is served before anything else; a
// read still running then is left, and its key erased when it ends.
func serve(log *slog.Logger, started *config.File, dev uapiDevice, st *reloadState, sigs signals) (sig os.Signal, failed error) {
	if sigs.started != nil {
		sigs.started()
	}
	// Started: tell systemd (dist/wgpio.service, Type=notify), which
	// then lets `systemctl reload` send SIGHUP. Under Type=simple a
	// SIGHUP sent in the process's first 0.1-0.4 s, before main ran
	// (Go's package initialisation, on a loaded machine), ended it with
	// Go's default, and systemd took that for a clean exit: no restart.
	// Nothing without NOTIFY_SOCKET.
	if _, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
		log.Warn("tell systemd the gateway is ready (NOTIFY_SOCKET)", "err", err)
	}
	defer daemon.SdNotify(false, daemon.SdNotifyStopping)
	path := started.Name
	results := make(chan loaded, 1)
	reading, again := false, false
	var readSince time.Time
	read := func() {
		reading, readSince = true, time.Now()
		go func() {
			if err := reloadCheck(path); err != nil {
				results <- loaded{nil, err}
				return
			}
			f, err := loadConfig(path)
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
			return sig, nil
		case err := <-sigs.failed:
			return nil, err
		default:
		}
		select {
		case sig := <-sigs.stop:
			return sig, nil
		case err := <-sigs.failed:
			return nil, err
		case <-sigs.reload:
			if reading {
				// Said when the read is slow (a file system that
				// hangs), not for every SIGHUP of a storm that finds
				// the previous read under way.
				if d := time.Since(readSince); !again && d >= time.Second {
					log.Warn("reload: still reading the file for an earlier SIGHUP; this one reads it again once that read ends",
						"file", path, "reading_for", d.Round(time.Millisecond))
				}
				again = true
				continue
			}
			read()
		case l := <-results:
			reading = false
			var r reloaded
			err := l.err
			if err == nil {
				// The file's warnings (its mode, keys wgpio ignores, a
				// prefix two peers list), as `wgpio up` logs them at
				// start: `kill -HUP` runs no `wgpio check` before it.
				warnWorldAccessible(log, path)
				for _, w := range l.f.Warnings {
					log.Warn("reload: config", "warning", w.String())
				}
				// What `wgpio check` refuses (a file cut short by
				// an editor, fast-path mode without a LAN) is not
				// applied: before, kill -HUP applied its peers
				// (none, of a file cut before them) and only then
				// said the next start would fail.
				if sigs.checkFile != nil {
					err = sigs.checkFile(l.f)
				}
				if err == nil {
					r, err = apply(started, l.f, dev)
				} else {
					l.f.Interface.PrivateKey.Zero() // apply erases it
				}
			}
			st.record(err, time.Now())
			if r.waited >= reloadWaitLogged {
				log.Warn("reload: waited for a UAPI set request in progress (a wg set client that stalls holds the configuration up to 10 s)",
					"file", path, "waited", r.waited.Round(time.Millisecond))
			}
			var refused *refusedError
			switch {
			case errors.As(err, &refused):
				log.Error("reload: the gateway refused a line of the configuration: the lines before it were applied, the rest not (as wg syncconf applies); fix the file and reload again",
					"file", path, "err", refused.err, "listen_port", refused.port)
				if refused.port == 0 {
					log.Error("reload: the gateway listens on no port now (its old one could not be taken back): no peer reaches it; set a free ListenPort and reload", "file", path)
				}
			case err != nil:
				log.Error("reload: configuration not applied; the gateway runs on as it was", "file", path, "err", err)
			default:
				log.Info("reload: peers, PrivateKey, ListenPort and FwMark applied as wg syncconf applies them",
					"file", path, "peers_added", r.added, "peers_removed", r.removed, "peers_kept", r.kept)
				if len(r.restart) > 0 {
					log.Warn("reload: keys changed in the file that take effect only at the next start (systemctl restart); the gateway runs on with those it started with",
						"file", path, "keys", strings.Join(r.restart, ", "))
					if sigs.nextStart != nil {
						if err := sigs.nextStart(l.f); err != nil {
							log.Warn("reload: the next start with this file would fail (a restart or reboot then leaves the gateway down): fix the file", "err", err)
						}
					}
				}
			}
			if again {
				again = false
				read()
			}
		}
	}
}

// reloadCheck is reloadable; tests that need a read that hangs replace
// it.
var reloadCheck = reloadable

// reloadable refuses, at a reload, a path that is not a regular file (a
// named pipe, a socket, a device; a symbolic link is followed): a reload
// reads the file again, which a pipe gives once (`-c <(...)` at start) or
// never (a FIFO nothing writes: the read hung, and every later SIGHUP
// waited behind it, unlogged). A path that cannot be read is left to
// loadConfig, which names the error.
func reloadable(path string) error {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%s is %s, not a regular file: a reload reads the file again, which only a file can give; make it a file", path, fileKind(fi.Mode()))
}

// fileKind names the kind of file of mode m, for a message: "a directory",
// "a named pipe" ...
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// reloaded is what a reload did: the peers the file added, removed (those
// running that it no longer lists) and kept (their sessions go on; their
// allowed IPs, keepalive and preshared key are set from the file, none
// where it has none, and their endpoint where it gives one:
// config.File.SyncUAPI), and the names of the keys (Address, MTU, [WGPIO]'s) whose values
// differ from the file the gateway started with, which a reload does not
// apply.
type reloaded struct {
	added, removed, kept int
	restart              []string
	// waited is how long the reload waited for a UAPI set request in
	// progress (a `wg set` client that stalls holds it up to 10 s,
	// and such clients queue): logged when it is long (serve).
	waited time.Duration
}

// reloadWaitLogged is the wait for a set request in progress from which
// a reload logs it.
const reloadWaitLogged = time.Second

// reload loads the file at started.Name and applies it to dev (apply). A
// file that does not parse changes nothing.
func reload(started *config.File, dev uapiDevice) (reloaded, error) {
	f, err := loadConfig(started.Name)
	if err != nil {
		return reloaded{}, err
	}
	return apply(started, f, dev)
}

// apply applies f to dev as `wg syncconf NAME <(wgpio strip FILE)` does
// (config.File.SyncUAPI): the peers it lists are set, the sessions of
// those unchanged go on, the others are removed. A running peer's allowed
// IPs are edited, not replaced, so that those it keeps stay routed to it
// all through the change (SyncUAPI). started is the file the
// gateway started with (reloaded.restart). It erases f's private key.
func apply(started, f *config.File, dev uapiDevice) (reloaded, error) {
	defer f.Interface.PrivateKey.Zero()
	var r reloaded
	// edit is the set=1 body for the running configuration cur. The
	// body holds the private key, in a string nothing can erase, as
	// every UAPI request through the socket does.
	edit := func(cur string) (string, error) {
		running := config.RunningPeers(cur)
		r = reloaded{restart: startOnlyChanged(started, f)}
		listed := make(map[string]bool, len(f.Peers))
		for i := range f.Peers {
			listed[f.Peers[i].PublicKey.Hex()] = true
		}
		for _, rp := range running {
			if k := rp.PublicKey; listed[k] {
				r.kept++
				delete(listed, k)
			} else {
				r.removed++
			}
		}
		r.added = len(listed)
		body := f.SyncUAPI(running)
		// Stock wireguard-go (the compat modes) rebinds its sockets on
		// every listen_port line, even of the port it has
		// (BindUpdate), and loses what arrives meanwhile: a reload of
		// an unchanged file lost packets in compat-mqtun, uncounted.
		// Linux's wg0 keeps an unchanged port; so does the reload,
		// which leaves the line out then.
		if p := listenPort(cur); p != 0 && p == int(f.Interface.ListenPort) {
			body = strings.TrimPrefix(body, "listen_port="+strconv.Itoa(p)+"\n")
		}
		return body, nil
	}
	if dev.update != nil {
		var old string
		var waited time.Duration
		asked := time.Now()
		err := dev.update(func(cur string) (string, error) {
			old, waited = cur, time.Since(asked)
			return edit(cur)
		})
		r.waited = waited
		if err != nil && old != "" {
			return r, refused(dev, atLine(f, err), old)
		}
		return r, err
	}
	cur, err := dev.get()
	if err != nil {
		return reloaded{}, fmt.Errorf("read the running configuration: %w", err)
	}
	body, _ := edit(cur)
	if err := dev.set(body); err != nil {
		return r, refused(dev, atLine(f, err), cur)
	}
	return r, nil
}

// atLine is err, the device's refusal of f's set, at the line of f it
// refused where that is known: EADDRINUSE comes from listen_port alone
// (the host holds the port), so it is f's ListenPort line's error, as
// the reload's other errors name file, line and key. Other refusals are
// returned as they are (the UAPI's errno does not say which line).
func atLine(f *config.File, err error) error {
	line, ok := f.Interface.Lines["ListenPort"]
	if !ok || !errors.Is(err, syscall.EADDRINUSE) {
		return err
	}
	return &config.Error{File: f.Name, Line: line, Key: "ListenPort", Msg: fmt.Sprintf(
		"port %d is in use on this host (ss -ulpn shows by what): %v", f.Interface.ListenPort, err)}
}

// refusedError is a set the device refused part way: the lines before the
// refused one applied (UAPI applies a set in order: wireguard-go, the
// kernel and gateway.Device alike), the rest not. port is the listen port
// the device has after it (0: none; -1: unknown, its configuration could
// not be read).
type refusedError struct {
	err  error
	port int
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("the gateway refused a line of the configuration, the lines before it applied: %v", e.err)
}

func (e *refusedError) Unwrap() error { return e.err }

// refused makes err, the device's refusal of a set made while it ran as
// old (its configuration's text), a refusedError. A device left without
// a listen port (wireguard-go closes its sockets before it opens the new
// port, and holds none when that fails) gets old's port back: without,
// compat mode sent and received nothing until the next reload.
func refused(dev uapiDevice, err error, old string) error {
	e := &refusedError{err: err, port: -1}
	cur, gerr := dev.get()
	if gerr != nil {
		return e
	}
	e.port = listenPort(cur)
	if was := listenPort(old); e.port == 0 && was != 0 {
		if dev.set(fmt.Sprintf("listen_port=%d\n", was)) == nil {
			e.port = was
		}
	}
	return e
}

// listenPort is the listen_port of a UAPI get's text (0: none).
func listenPort(get string) int {
	for line := range strings.Lines(get) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "listen_port="); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// startOnlyChanged names, in file order of sections, the keys a reload
// does not apply whose values differ between the file the gateway
// started with (a) and the reloaded one (b): Address, MTU and every
// [WGPIO] key (its field names are its key names), each by the value it
// takes (withDefaults): a key written with its default value where it
// was unset, or the reverse, changes nothing and is not named.
func startOnlyChanged(a, b *config.File) []string {
	var keys []string
	if !slices.Equal(a.Interface.Addresses, b.Interface.Addresses) {
		keys = append(keys, "Address")
	}
	if a.Interface.MTU != b.Interface.MTU {
		keys = append(keys, "MTU")
	}
	va, vb := reflect.ValueOf(withDefaults(a.WGPIO)), reflect.ValueOf(withDefaults(b.WGPIO))
	for i := range va.NumField() {
		name := va.Type().Field(i).Name
		if name != "Lines" && !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			keys = append(keys, name)
		}
	}
	return keys
}

// withDefaults is w with the [WGPIO] keys left unset whose default is a
// value that can be written (config's documented defaults: Mode
// fastpath, AddressMode shared, XDPMode auto, MetricsPeers 1000,
// MSSClamp off, ICMPRate 1000, ICMPBurst 50, ICMPDestInterval 1000 ms,
// ReplayWindow auto) set to it. The defaults that depend on the host or
// on other keys (Queues, HandshakeWorkers, SourcePorts) stay unset.
func withDefaults(w config.WGPIO) config.WGPIO {
	if w.Mode == "" {
		w.Mode = config.ModeFastPath
	}
	if w.AddressMode == "" {
		w.AddressMode = config.AddressShared
	}
	if w.XDPMode == "" {
		w.XDPMode = config.XDPAuto
	}
	if w.MetricsPeers == 0 {
		w.MetricsPeers = config.DefaultMetricsPeers
	}
	if w.MSSClamp == 0 {
		w.MSSClamp = config.MSSClampOff
	}
	if w.ICMPRate == 0 {
		w.ICMPRate = icmprate.DefaultRate
	}
	if w.ICMPBurst == 0 {
		w.ICMPBurst = icmprate.DefaultBurst
	}
	if w.ICMPDestInterval == 0 {
		w.ICMPDestInterval = icmprate.DefaultDestInterval
	}
	if w.ReplayWindow == 0 {
		w.ReplayWindow = config.ReplayWindowAuto
	}
	return w
}

// reloadState is the outcome of the last reload, for /metrics: whether it
// applied the file (the start counts as a successful load) and when the
// last successful one was. Safe for concurrent use; a nil *reloadState
// records nothing.
type reloadState struct {
	failed    atomic.Bool
	successNs atomic.Int64 // Unix time in ns of the last successful load
}

// newReloadState is the state after a successful start at t.
func newReloadState(t time.Time) *reloadState {
	st := &reloadState{}
	st.successNs.Store(t.UnixNano())
	return st
}

// record notes a reload at t that failed with err, or succeeded (nil).
func (st *reloadState) record(err error, t time.Time) {
	if st == nil {
		return
	}
	st.failed.Store(err != nil)
	if err == nil {
		st.successNs.Store(t.UnixNano())
	}
}
