//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/acceptloop"
	"github.com/wgpio/wgpio/replay"
	"github.com/wgpio/wgpio/tundev"
)

// runDir holds wgpio's own sockets and locks (the UAPI sockets live in
// /var/run/wireguard, shared with every WireGuard implementation).
const runDir = "/var/run/wgpio"

// uapiDir holds the UAPI sockets of every WireGuard implementation,
// /var/run/wireguard/<name>.sock (wireguard-go's ipc, wg(8)).
const uapiDir = "/var/run/wireguard"

// uapiNameFree refuses a name whose UAPI socket some WireGuard answers
// already (wireguard-go, a wgpio in another network namespace: the
// directory is one for all namespaces), before the gateway opens its
// ports: the start then failed after it had attached XDP, with
// wireguard-go's "unix socket in use". A socket left behind by a process
// gone (nothing answers) is no obstacle: the gateway replaces it.
func uapiNameFree(name string) error {
	path := filepath.Join(uapiDir, name+".sock")
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return nil
	}
	c.Close()
	return fmt.Errorf("up: a WireGuard interface named %s already answers on %s (`wg show %s`: wireguard-go or another wgpio, maybe of another network namespace: the directory is shared by all of them): stop it, or start this gateway under another name with -name", name, path, name)
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(lossCountingWriter{os.Stderr, &logLinesLost}, &slog.HandlerOptions{Level: l})), nil
}

// upUsage heads `wgpio up -h`: how to watch, reload and stop a gateway.
const upUsage = `usage: wgpio up -c FILE [flags]

Runs a gateway from a wg-quick style file plus an optional [WGPIO] section,
in the foreground, until SIGINT (Ctrl-C) or SIGTERM. SIGHUP (systemctl
reload, kill -HUP) applies the edited file's peers, PrivateKey, ListenPort
and FwMark as wg syncconf does; Address, MTU and [WGPIO] apply at the next
start. Watch it with wg show NAME, wgpio stats NAME, and /metrics on the
MetricsAddress.

`

func cmdUp(args []string) error {
	reload := notifyReload() // before anything that takes time
	survivePipe()
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), upUsage)
		fs.PrintDefaults()
	}
	conf := fs.String("c", "", "wg-quick style configuration `file` (required)")
	name := fs.String("name", "", "interface and UAPI socket `name` (default: the file name without .conf)")
	overrides := addOverrideFlags(fs)
	csum4 := fs.Bool("ipv4-udp-checksum", false, "compute outer IPv4 UDP checksums (default 0, as RFC 768 allows: the WireGuard payload is authenticated anyway)")
	logLevel := fs.String("log", "info", "log `level`: debug, info, warn, error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// A missing -c or a stray argument is a usage error, as check's: the
	// error, then the usage, exit status 2 (main).
	var usageErr error
	switch {
	case fs.NArg() > 0 && *conf == "":
		// wg-quick's habit (wg-quick up wg0, for /etc/wireguard/wg0.conf):
		// a bare name that is no file stands for /etc/wgpio/NAME.conf.
		file := fs.Arg(0)
		if _, err := os.Stat(file); err != nil && !strings.ContainsRune(file, '/') && !strings.HasSuffix(file, ".conf") {
			file = filepath.Join(configDir, file+".conf")
		}
		usageErr = fmt.Errorf("up: unexpected argument %q (the configuration file goes after -c: wgpio up -c %s)", fs.Arg(0), file)
	case fs.NArg() > 0:
		usageErr = fmt.Errorf("up: unexpected argument %q after the flags", fs.Arg(0))
	case *conf == "":
		usageErr = errors.New("up: -c FILE is required")
	}
	if usageErr != nil {
		fmt.Fprintln(fs.Output(), usageErr)
		fs.Usage()
		return flagError{usageErr}
	}
	if err := overrides.check("up"); err != nil {
		return err
	}
	log, err := newLogger(*logLevel)
	if err != nil {
		return err
	}
	f, err := loadConfig(*conf)
	if err != nil {
		return err
	}
	for _, w := range f.Warnings {
		log.Warn("config", "warning", w.String())
	}
	warnWorldAccessible(log, *conf)
	if *name == "" {
		*name = strings.TrimSuffix(filepath.Base(*conf), ".conf")
	}
	w := f.WGPIO
	overrides.apply(&w)
	if err := checkName("up", *name, *conf); err != nil {
		return err
	}
	warnIgnored(log, f, w)
	if err := checkFile(f, w); err != nil {
		return err
	}
	// The interfaces an instance takes: their NIC queues and XDP hook, so
	// the trunk of a kernel VLAN device.
	var ifaces []string
	switch w.Mode {
	case config.ModeFastPath, config.ModeCompat:
		if err := checkCaps(fastpathCaps); err != nil {
			return err
		}
		if err := checkPortPrivilege(f, w); err != nil {
			return err
		}
		warnNetfilter(log, f, w)
		ifaces = []string{trunkOf(w.WAN), trunkOf(w.LAN)}
	case config.ModeCompatMQTUN:
		if err := checkCaps(mqtunCaps); err != nil {
			return err
		}
		if err := checkPortPrivilege(f, w); err != nil {
			return err
		}
	}
	if err := checkSystem(f, w, *name); err != nil {
		return err
	}
	unlock, err := lockInstance(*name, ifaces)
	if err != nil {
		return err
	}
	defer unlock()
	restoreOffloads(log, runDir, ifaces)
	if err := uapiNameFree(*name); err != nil {
		return err
	}
	// After the lock: a second instance is refused before it warns of
	// the first one's tunnel interface.
	if w.Mode != config.ModeCompat { // compat mode gives Address to no interface
		warnAddressOverlaps(log, f, w, *name)
	}

	// From here a SIGTERM or SIGHUP waits for serve, once the gateway runs;
	// a second SIGTERM or SIGINT during the start aborts it.
	sigs := notifySignals(reload)
	sigs.checkFile = func(f *config.File) error {
		w := f.WGPIO
		overrides.apply(&w)
		return checkFile(f, w)
	}
	sigs.nextStart = func(f *config.File) error {
		w := f.WGPIO
		overrides.apply(&w)
		if err := checkFile(f, w); err != nil {
			return err
		}
		return checkSystem(f, w, *name)
	}
	sigs.started = watchStart(log, sigs.stop, abortStart(log))
	defer sigs.started()
	switch w.Mode {
	case config.ModeFastPath:
		return upFastpath(log, *name, f, w, *csum4, sigs)
	case config.ModeCompat:
		return upCompat(log, *name, f, w, sigs)
	case config.ModeCompatMQTUN:
		return upCompatMQTUN(log, *name, f, w, sigs)
	default:
		return fmt.Errorf("%s: [WGPIO] Mode %q is not available in this build (use fastpath, compat or compat-mqtun)", *conf, w.Mode)
	}
}

// warnForwarding warns when the kernel would not forward a family the
// peers' allowed IPs use (forwardingOff): in shared address mode with an
// exception TUN (an Address), the fast path hands decrypted traffic whose
// route leads out of another interface than the LAN (a full-tunnel road
// warrior's Internet traffic) to the host's kernel through that TUN, to
// forward by its routes and netfilter as Linux's wg0 does (fastpath,
// hairpin.go); with forwarding off the kernel drops it, and also the LAN's
// traffic to a removed peer's allowed IPs, which the routes the gateway
// keeps into that TUN lead there for the engine to count as no_route and
// answer (fastgw, prefixes.go). A warning, not a
// refusal as compat-mqtun's checkForwarding: most gateways route only
// between the tunnel and the LAN and never need it.
func warnForwarding(log *slog.Logger, f *config.File, name string) {
	off, err := forwardingOff(f)
	if err != nil {
		log.Warn("could not read the forwarding sysctls", "err", err)
		return
	}
	if len(off) > 0 {
		log.Warn(forwardingWarning(off, name), "sysctls", strings.Join(off, " "))
	}
}

// forwardingWarning is warnForwarding's text for the sysctls off (from
// forwardingOff, not empty) of the gateway name, which `wgpio check
// -system` gives too (systemWarnings).
func forwardingWarning(off []string, name string) string {
	return fmt.Sprintf("forwarding is off in this network namespace (%s): decrypted traffic the host routes out of another interface than the LAN "+
		"(a full-tunnel peer's Internet traffic) goes to the kernel through %s, which will drop it; if peers send such traffic, run `sysctl -w %s` (and keep it in /etc/sysctl.d/). "+
		"Until then the LAN's traffic to a removed peer's allowed IPs is dropped by the kernel too (IpInAddrErrors in nstat), neither counted as no_route nor answered with host unreachable. "+
		"Forwarding on also routes the kernel's own traffic between the WAN and the LAN in cleartext, as on any Linux router: give netfilter's forward hook a drop policy for what must not cross",
		strings.Join(off, ", "), name, sysctlsOn(off))
}

func peerConfigs(f *config.File) []gateway.PeerConfig {
	var out []gateway.PeerConfig
	for _, p := range f.Peers {
		out = append(out, gateway.PeerConfig{
			PublicKey: p.PublicKey, PresharedKey: p.PresharedKey, Endpoint: p.Endpoint,
			PersistentKeepalive: time.Duration(p.PersistentKeepalive) * time.Second,
			AllowedIPs:          p.AllowedIPs,
		})
	}
	return out
}

// fastgwConfig is the fast path's configuration of f (with w, its
// [WGPIO] as the flags leave it) for gateway name: what upFastpath starts
// and `wgpio check -system` checks (fastgw.CheckMTU). WAN, LAN and
// SourcePorts: checkFile.
func fastgwConfig(name string, f *config.File, w config.WGPIO, csum4 bool, log *slog.Logger) fastgw.Config {
	attach := afxdp.AttachAuto
	switch w.XDPMode {
	case config.XDPNative:
		attach = afxdp.AttachNative
	case config.XDPGeneric:
		attach = afxdp.AttachGeneric
	}
	cfg := fastgw.Config{
		Name: name, PrivateKey: f.Interface.PrivateKey, ListenPort: f.Interface.ListenPort,
		Peers: peerConfigs(f), WAN: w.WAN, LAN: w.LAN, WANVLAN: w.WANVLAN, LANVLAN: w.LANVLAN, Queues: w.Queues, CPUs: w.CPUs, HandshakeWorkers: w.HandshakeWorkers,
		Attach: attach, MTU: f.Interface.MTU, Addresses: f.Interface.Addresses,
		IPv4UDPChecksum: csum4, Logger: log,
		ICMPRate: w.ICMPRate, ICMPBurst: w.ICMPBurst, ICMPDestInterval: w.ICMPDestInterval,
	}
	switch w.ReplayWindow {
	case config.ReplayWindowNarrow:
		cfg.ReplayWindow = replay.Narrow
	case config.ReplayWindowWide:
		cfg.ReplayWindow = replay.Wide
	default: // unset or auto
		cfg.ReplayWindow = replay.Auto
	}
	switch w.MSSClamp {
	case config.MSSClampAuto:
		cfg.MSSClamp = fastpath.MSSClampAuto
	case config.MSSClampOff:
	default:
		cfg.MSSClamp = w.MSSClamp
	}
	if w.AddressMode == config.AddressOwned {
		cfg.Owned = true
		cfg.WANAddress, cfg.LANAddress, cfg.Gateway = w.WANAddress, w.LANAddress, w.Gateway
	}
	if w.SourcePorts.First != 0 {
		cfg.ListenPort = w.SourcePorts.First
		cfg.SourcePorts = uint16(w.SourcePorts.Len())
	}
	return cfg
}

// upFastpath runs the fast path until SIGINT or SIGTERM, or the gateway's
// failure (fastgw.Gateway.Failed), which it returns after the shutdown.
func upFastpath(log *slog.Logger, name string, f *config.File, w config.WGPIO, csum4 bool, sigs signals) error {
	cfg := fastgwConfig(name, f, w, csum4, log)
	cfg.Journal = newOffloadJournal(runDir, name)
	if len(cfg.Addresses) > 0 && !cfg.Owned {
		warnForwarding(log, f, name)
	}
	// Take the metrics address first: if it is in use, fail before
	// touching the interfaces.
	var metricsLn net.Listener
	if w.MetricsAddress != "" {
		ln, err := listenMetrics(f.Name, w)
		if err != nil {
			return err
		}
		metricsLn = ln
		defer ln.Close()
	}
	g, err := fastgw.Start(cfg)
	if err != nil {
		return startError(f, err)
	}
	if m := f.Interface.FwMark; m != 0 {
		// Reported by wg show, as a Linux wg0 reports the file's FwMark;
		// it marks nothing (README, "fwmark, policy routing and VRFs").
		if err := g.Device().IpcSet(strings.NewReader("fwmark=" + strconv.FormatUint(uint64(m), 10) + "\n")); err != nil {
			g.Close()
			return fmt.Errorf("%s: FwMark: %w", f.Name, err)
		}
	}
	stopStats, err := serveStats(log, name, func() any { s := statsOf(g); s.Name = name; return s })
	if err != nil {
		g.Close()
		return err
	}
	stopCapture, err := serveCapture(name, g.Engine(), log)
	if err != nil {
		stopStats()
		g.Close()
		return err
	}
	stop := func() { stopCapture(); stopStats() }
	reloads := newReloadState(time.Now())
	if metricsLn != nil {
		if err := serveMetrics(log, metricsLn, name, func() GatewayStats { return countersOf(g) }, boundedPeerStats(g.Device()), metricsPeers(w), reloads); err != nil {
			stop()
			g.Close()
			return err
		}
	}
	log.Info("running; stop with Ctrl-C or SIGTERM, reload the file with SIGHUP", "uapi", "/var/run/wireguard/"+name+".sock")
	sigs.failed = g.Failed()
	sig, failed := serve(log, f, uapiDevice{
		get: func() (string, error) {
			var b strings.Builder
			err := g.Device().IpcGet(&b)
			return b.String(), err
		},
		set:    func(body string) error { return g.Device().IpcSet(strings.NewReader(body)) },
		update: g.Device().IpcUpdate,
	}, reloads, sigs)
	logStopping(log, sig, failed)
	final := statsOf(g)
	stop()
	err = g.Close()
	// Close counts what it throws away (packets held for a handshake,
	// mail no worker took: closed): the queues' drops are read again
	// after it, so that the last lines say what the stop lost.
	for i, q := range g.Engine().Stats() {
		if i < len(final.Queues) {
			final.Queues[i].Drops = q.Drops
		}
	}
	logFinal(log, final)
	return exitError(log, failed, err)
}

// GatewayStats is what `wgpio stats` prints (-json: this struct) and the
// metrics export. The fast path fills every field but Compat and
// PeersConfigured; compat mode fills Name, Mode, Compat, Peers and
// PeersConfigured, and compat-mqtun Name, Mode, TUN, UDP, Peers and
// PeersConfigured. What a mode does not count is left out of the JSON,
// not written as zeros: stock wireguard-go, which carries compat modes'
// handshakes and keepalives, keeps no counters of them (its UAPI gives
// per peer only bytes and the last handshake: `wg show`, and Peers), so
// compat modes have no control_plane, and no exception_tun_drops (they
// have no exception TUN).
type GatewayStats struct {
	Name string `json:"name"`
	// Mode is "" for the fast path, else the [WGPIO] Mode.
	Mode   string                `json:"mode,omitempty"`
	Queues []fastpath.QueueStats `json:"queues"`
	Peers  []PeerStat            `json:"peers"`
	// Device is the fast path's control plane's counters; nil in compat
	// modes.
	Device *gateway.Stats `json:"control_plane,omitempty"`
	// XDP holds each port's XDP program counters ("lan", "wan"), frames
	// by verdict: xdp_redirect_* went to the workers (compat mode: the
	// bind and tundev), xdp_pass* to the kernel (xdp_pass_vlan: of
	// another VLAN than the port's), xdp_drop_vlan nowhere (behind more
	// VID-0 tags than the program takes off); nil in compat-mqtun, which
	// has no XDP program.
	XDP map[string]map[string]uint64 `json:"xdp,omitempty"`
	// ExceptionDrops counts the packets for the host that the exception
	// TUN refused (its interface down or its queue full:
	// fastgw.Gateway.ExceptionDrops; by reason in TUN); nil in compat
	// modes.
	ExceptionDrops *uint64 `json:"exception_tun_drops,omitempty"`
	// TUN is the kernel TUN's counters (packets read from the kernel and
	// written to it, drops by reason, tundev.TUNStats): the exception
	// TUN's on the fast path with an Address, wireguard-go's TUN's in
	// compat-mqtun; nil otherwise.
	TUN *tundev.TUNStats `json:"tun,omitempty"`
	// UDP is compat-mqtun's counters of the kernel's UDP sockets under
	// stock wireguard-go (countingBind); nil in the other modes.
	UDP *UDPStats `json:"udp,omitempty"`
	// Compat holds compat mode's counters (Queues is then empty, Device
	// and ExceptionDrops nil).
	Compat *CompatStats `json:"compat,omitempty"`
	// Reassembly is the fast path's reassembly of the WireGuard datagrams
	// that arrive as IP fragments (Engine.ReassemblyStats); the owned
	// address mode's only, nil otherwise (the kernel reassembles them).
	Reassembly *fastpath.ReassemblyStats `json:"reassembly,omitempty"`
	// Neighbours is the owned address mode's ARP and NDP counters by side
	// ("wan", "lan": fastgw.Gateway.Neighbours); nil otherwise (the
	// kernel answers them).
	Neighbours map[string]fastgw.NeighbourStats `json:"neighbours,omitempty"`
	// UAPIRefused counts the connections to the UAPI socket
	// (/var/run/wireguard/NAME.sock) refused, closed unserved (answered
	// EAGAIN first unless 64 refusals were being answered already,
	// uapiserve.Refuse), in every mode:
	// over 64 served at once, they waited 15 s for a place, or found 64
	// others waiting already (gateway.Stats.UAPIRefused,
	// compatgw.Stats.UAPIRefused, uapiserve.NewServer).
	UAPIRefused uint64 `json:"uapi_connections_refused"`
	// PeersConfigured is the number of peers of a compat mode's stock
	// wireguard-go device (read through its UAPI: wgPeers), nil when it
	// could not be read, and in the fast path, whose count is
	// Device.PeersConfigured.
	PeersConfigured *uint64 `json:"peers_configured,omitempty"`
	// LogLinesLost counts the log lines the gateway could not write to
	// its standard error (its reader gone, a broken pipe: logLinesLost),
	// in every mode.
	LogLinesLost uint64 `json:"log_lines_lost"`
}

// PeerStat is a peer's state without key material (the pre-shared key of
// gateway.PeerStatus never leaves the process).
type PeerStat struct {
	PublicKey     string    `json:"public_key"`
	Endpoint      string    `json:"endpoint,omitempty"`
	LastHandshake time.Time `json:"last_handshake"`
	TxBytes       uint64    `json:"tx_bytes"`
	RxBytes       uint64    `json:"rx_bytes"`
}

// statsOf is what `wgpio stats` reads of g: countersOf and every peer's.
func statsOf(g *fastgw.Gateway) GatewayStats {
	s := countersOf(g)
	s.Peers = peerStats(g.Device())
	return s
}

// countersOf is g's counters, without the peers'.
func countersOf(g *fastgw.Gateway) GatewayStats {
	dev, exc := g.Device().Stats(), g.ExceptionDrops()
	s := GatewayStats{Queues: g.Engine().Stats(), Device: &dev, ExceptionDrops: &exc, UAPIRefused: dev.UAPIRefused, LogLinesLost: logLinesLost.Load()}
	if ts, ok := g.ExceptionTUN(); ok {
		s.TUN = &ts
	}
	s.XDP = xdpCounters(g.Ports())
	if r, ok := g.Engine().ReassemblyStats(); ok {
		s.Reassembly = &r
	}
	if n, ok := g.Neighbours(); ok {
		s.Neighbours = n
	}
	return s
}

// xdpCounters is GatewayStats.XDP: the XDP program counters of the ports
// wan and lan (AF_XDP ports: the xdp_ counters of their Stats' Backend).
func xdpCounters(wan, lan dataplane.Port) map[string]map[string]uint64 {
	out := map[string]map[string]uint64{}
	for name, p := range map[string]interface{ Stats() dataplane.Stats }{"wan": wan, "lan": lan} {
		m := map[string]uint64{}
		for k, v := range p.Stats().Backend {
			if strings.HasPrefix(k, "xdp_") {
				m[k] = v
			}
		}
		out[name] = m
	}
	return out
}

// peerStats is every peer's PeerStat, in configuration order (from
// PeerStates: Peers would copy every peer's allowed IPs, 50 ms and 26 MB
// at 100,000 peers).
func peerStats(dev *gateway.Device) []PeerStat {
	states := dev.PeerStates(nil)
	out := make([]PeerStat, 0, len(states))
	for _, p := range states {
		ps := PeerStat{PublicKey: p.PublicKey.Base64(), LastHandshake: p.LastHandshake, TxBytes: p.TxBytes, RxBytes: p.RxBytes}
		if p.Endpoint.IsValid() {
			ps.Endpoint = p.Endpoint.String()
		}
		out = append(out, ps)
	}
	return out
}

// logFinal logs s at exit: each queue's counts and drops by reason, what
// its ports and the kernel at their sockets lost before the workers saw
// it (dataplane.Stats.Losses, when anything), and the packets for the
// host the exception TUN refused when there were any (they are no
// queue's drops: the workers handed them on).
func logFinal(log *slog.Logger, s GatewayStats) {
	if s.ExceptionDrops != nil && *s.ExceptionDrops > 0 {
		attrs := []any{"exception_tun_drops", *s.ExceptionDrops}
		if s.TUN != nil {
			attrs = append(attrs, "by_reason", strings.Join(s.TUN.Drops.List(), " "))
		}
		log.Info("final counters", attrs...)
	}
	for i, q := range s.Queues {
		attrs := []any{"queue", i, "encrypted", q.Encrypted, "decrypted", q.Decrypted}
		for r, n := range q.Drops {
			if n > 0 {
				attrs = append(attrs, "drop_"+fastpath.DropReason(r).String(), n)
			}
		}
		for _, p := range []struct {
			key string
			st  dataplane.Stats
		}{{"lan_port_losses", q.LAN}, {"wan_port_losses", q.WAN}} {
			if l := p.st.Losses(); len(l) > 0 {
				attrs = append(attrs, p.key, strings.Join(l, " "))
			}
		}
		log.Info("final counters", attrs...)
	}
}

// statsWriteTimeout bounds how long serveStats waits for a client to take
// its reply (a variable for the tests).
var statsWriteTimeout = 5 * time.Second

// statsClients is how many `wgpio stats` clients serveStats answers at
// once; more wait in the socket's backlog for one of them to finish.
// Each reply is built for its client and, with 100,000 peers, holds
// tens of megabytes.
const statsClients = 4

// serveStats answers `wgpio stats` on a unix socket with one JSON document
// per connection, statsClients connections at a time: a client that does
// not read (a stopped `wgpio stats`) holds one of them for
// statsWriteTimeout at most and delays no other. A failed accept (out of
// descriptors) is logged to log and tried again (acceptloop).
func serveStats(log *slog.Logger, name string, get func() any) (stop func(), err error) {
	path := filepath.Join(runDir, name+".stats")
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("stats socket %s: %w", path, err)
	}
	slots := make(chan struct{}, statsClients)
	go func() {
		for {
			slots <- struct{}{} // a free slot before the next client
			c, err := acceptloop.Accept(ln, func(err error) { log.Warn("stats socket: accept failed; trying again", "err", err) })
			if err != nil {
				return
			}
			go func() {
				defer func() { <-slots }()
				defer c.Close()
				// The reply, which lists every peer, may not fit
				// the socket buffer.
				c.SetWriteDeadline(time.Now().Add(statsWriteTimeout))
				json.NewEncoder(c).Encode(get())
			}()
		}
	}()
	return func() { ln.Close(); os.Remove(path) }, nil
}
