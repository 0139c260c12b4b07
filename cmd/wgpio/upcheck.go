//go:build linux

package main

// The checks of the configuration that wgpio up (and wgpio check) make
// before starting a gateway: each error names the file, line and key.
// Those against this system (interfaces, queues, CPUs) are in
// upcheck_system.go.

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/gateway/tunnelmtu"
)

// keyError is a problem with the value of key, found when the gateway
// starts: an error of the configuration file at the key's line, or of the
// flag that set it.
func keyError(file string, lines map[string]int, key, flag, msg string) error {
	if line, ok := lines[key]; ok {
		return &config.Error{File: file, Line: line, Key: key, Msg: msg}
	}
	if flag != "" {
		return &flagKeyError{flag: flag, msg: msg}
	}
	return fmt.Errorf("%s: [WGPIO] %s: %s", file, key, msg)
}

// flagKeyError is keyError's error of a value a flag gave, "CMD: -FLAG:
// MSG", CMD being up unless check reports it (forCheck).
type flagKeyError struct {
	cmd  string // "" is up
	flag string // without the dash
	msg  string
}

func (e *flagKeyError) Error() string {
	cmd := e.cmd
	if cmd == "" {
		cmd = "up"
	}
	return fmt.Sprintf("%s: -%s: %s", cmd, e.flag, e.msg)
}

// forCheck is err as check reports it: an error of a flag's value says
// "check: -FLAG: ..." (`wgpio check -mode compat-mqtun` said "up: -mode:
// ...", as if up had run). err itself is changed, and returned.
func forCheck(err error) error {
	var fe *flagKeyError
	if errors.As(err, &fe) {
		fe.cmd = "check"
	}
	return err
}

// overrideFlags are the flags of up and check that override [WGPIO] keys,
// so that check checks a file as up runs it with the same flags.
type overrideFlags struct {
	mode, wan, lan, xdp, metrics *string
	queues                       *int
}

// addOverrideFlags defines the override flags on fs.
func addOverrideFlags(fs *flag.FlagSet) *overrideFlags {
	return &overrideFlags{
		mode:    fs.String("mode", "", "override [WGPIO] Mode: fastpath, compat or compat-mqtun"),
		wan:     fs.String("wan", "", "override [WGPIO] WAN `interface`"),
		lan:     fs.String("lan", "", "override [WGPIO] LAN `interface`"),
		queues:  fs.Int("queues", 0, "override [WGPIO] Queues (0: the file's, else one per RX queue)"),
		xdp:     fs.String("xdp", "", "override [WGPIO] XDPMode: auto, native or generic"),
		metrics: fs.String("metrics-addr", "", "override [WGPIO] MetricsAddress: serve Prometheus metrics on `host:port`"),
	}
}

// check refuses a value the flags of cmd (up, check) cannot take.
func (o *overrideFlags) check(cmd string) error {
	switch config.Mode(*o.mode) {
	case "", config.ModeFastPath, config.ModeCompat, config.ModeCompatMQTUN:
	default:
		return fmt.Errorf("%s: -mode %q: want fastpath, compat or compat-mqtun", cmd, *o.mode)
	}
	switch config.XDPMode(*o.xdp) {
	case "", config.XDPAuto, config.XDPNative, config.XDPGeneric:
	default:
		return fmt.Errorf("%s: -xdp %q: want auto, native or generic", cmd, *o.xdp)
	}
	if *o.queues < 0 {
		return fmt.Errorf("%s: -queues %d: want 1 or more (left out, or 0: the file's Queues, else one per RX queue of the interfaces)", cmd, *o.queues)
	}
	// The bounds the file's keys have (config), whatever the system: check
	// without -system said ok of -queues 300 and -wan a/b, which every up
	// refuses.
	if *o.queues > config.MaxQueues {
		return fmt.Errorf("%s: -queues %d: want 1 to %d (Queues' range)", cmd, *o.queues, config.MaxQueues)
	}
	for _, f := range []struct{ flag, name string }{{"wan", *o.wan}, {"lan", *o.lan}} {
		if f.name != "" && !gateway.ValidName(f.name) {
			return fmt.Errorf("%s: -%s %q is not an interface name (1 to 15 bytes, no '/', ':' or white space)", cmd, f.flag, f.name)
		}
	}
	if *o.metrics != "" {
		if err := checkMetricsAddr(*o.metrics); err != nil {
			return fmt.Errorf("%s: -metrics-addr %q: %w", cmd, *o.metrics, err)
		}
	}
	return nil
}

// apply sets the keys of w the flags give, which are then no longer the
// file's: w.Lines (w's own copy) loses them, so that their errors name
// the flag (keyError). Mode left out of both is fastpath.
func (o *overrideFlags) apply(w *config.WGPIO) {
	w.Lines = maps.Clone(w.Lines)
	set := func(given bool, key string) bool {
		if given {
			delete(w.Lines, key)
		}
		return given
	}
	if set(*o.mode != "", "Mode") {
		w.Mode = config.Mode(*o.mode)
	}
	if set(*o.wan != "", "WAN") {
		w.WAN = *o.wan
	}
	if set(*o.lan != "", "LAN") {
		w.LAN = *o.lan
	}
	if set(*o.queues > 0, "Queues") {
		w.Queues = *o.queues
	}
	if set(*o.xdp != "", "XDPMode") {
		w.XDPMode = config.XDPMode(*o.xdp)
	}
	if set(*o.metrics != "", "MetricsAddress") {
		w.MetricsAddress = *o.metrics
	}
	if w.Mode == "" {
		w.Mode = config.ModeFastPath
	}
}

// checkName refuses a gateway name that cannot name an interface (the
// exception TUN or compat mode's TUN bears it) before anything is opened;
// cmd (up, check) heads the error.
func checkName(cmd, name, conf string) error {
	if checkGatewayName(name) != nil {
		return fmt.Errorf("%s: gateway name %q (from -name, else the file name %s without .conf) cannot name an interface: "+
			"1 to 15 bytes, no '/', ':' or white space; choose one with -name", cmd, name, filepath.Base(conf))
	}
	return nil
}

// checkGatewayName refuses what cannot be a gateway's name: an interface
// name (gateway.ValidName), which also keeps the name inside runDir.
func checkGatewayName(name string) error {
	if !gateway.ValidName(name) {
		return fmt.Errorf("%q cannot be a gateway name (an interface name: 1 to 15 bytes, no '/', ':', '%%' (the kernel's name template) or white space; `wgpio stats` lists the running ones)", name)
	}
	return nil
}

// warnIgnored warns of settings the chosen mode does not act on
// (ignoredKeys).
func warnIgnored(log *slog.Logger, f *config.File, w config.WGPIO) {
	for _, warning := range ignoredKeys(f, w) {
		log.Warn("config", "warning", warning.String())
	}
}

// ignoredKeys lists, in the file's order, the keys of f that w.Mode (set)
// does not act on, and a FwMark that it does not carry: only
// compat-mqtun's kernel sockets carry a mark (README, "fwmark, policy
// routing and VRFs"); "off" or 0, which ask for none, are no warning.
func ignoredKeys(f *config.File, w config.WGPIO) []config.Warning {
	var out []config.Warning
	warn := func(lines map[string]int, key, msg string) {
		if line, ok := lines[key]; ok {
			out = append(out, config.Warning{File: f.Name, Line: line, Key: key, Msg: msg})
		}
	}
	if f.Interface.FwMark != 0 && w.Mode != config.ModeCompatMQTUN {
		var line int
		for _, u := range f.Interface.Unused {
			if u.Key == "FwMark" {
				line = u.Line // the last one, whose value FwMark holds
			}
		}
		out = append(out, config.Warning{File: f.Name, Line: line, Key: "FwMark",
			Msg: fmt.Sprintf("reported by wg show, but marks no packet in Mode = %s, which sends through no socket (only Mode = compat-mqtun's sockets carry it)", w.Mode)})
	}
	if w.Mode == config.ModeCompat || w.Mode == config.ModeCompatMQTUN {
		warn(w.Lines, "ReplayWindow", "ignored in the compat modes: wireguard-go keeps its own 8128-counter replay window")
		warn(w.Lines, "HandshakeWorkers", "ignored in the compat modes: wireguard-go runs its own handshake goroutines, one per CPU")
	}
	switch w.Mode {
	case config.ModeCompat:
		// Linux's wg-quick gives Address to wg0 and routes the
		// peers' allowed IPs into it: the host itself reaches the
		// peers. Mode = compat has no interface into the tunnel for
		// the host (stock wireguard-go runs on the NIC queues), so the
		// host's own packets to the peers' networks follow its other
		// routes: out of the WAN, in cleartext, by a default route.
		warn(f.Interface.Lines, "Address", "given to no interface in Mode = compat, which has none into the tunnel for the host itself: "+
			"the host's own packets to the peers' networks (a ping, an SSH or a DNS query from the gateway) follow its other routes, out of the WAN in cleartext by a default route, "+
			"and nothing the peers send to the gateway's own addresses is answered; the LAN's traffic is not affected. "+
			"Use Mode = fastpath (its exception TUN holds Address) or compat-mqtun for the host's own traffic, "+
			"or keep it off the WAN with an unreachable route for Address's network and for each allowed-IPs prefix (ip route add unreachable PREFIX), added before the gateway starts")
		warn(w.Lines, "CPUs", "ignored in Mode = compat (workers are pinned in fastpath mode only)")
		warn(w.Lines, "SourcePorts", "ignored in Mode = compat: wireguard-go sends from the listen port only (ListenPort; a range spreads flows in fastpath mode only)")
	case config.ModeCompatMQTUN:
		warn(w.Lines, "MSSClamp", "ignored in Mode = compat-mqtun: the kernel forwards (clamp with an nftables or iptables TCPMSS rule)")
		for _, k := range []string{"WAN", "LAN", "AddressMode", "SourcePorts", "XDPMode", "WANAddress", "LANAddress", "Gateway"} {
			warn(w.Lines, k, "ignored in Mode = compat-mqtun: stock wireguard-go uses the kernel's UDP sockets and a TUN, not the NIC queues")
		}
		warn(w.Lines, "CPUs", "ignored in Mode = compat-mqtun (workers are pinned in fastpath mode only)")
	}
	slices.SortStableFunc(out, func(a, b config.Warning) int { return cmp.Compare(a.Line, b.Line) })
	return out
}

// checkVLANMode refuses a trunk's VLAN (WANVLAN, LANVLAN) outside fastpath
// mode; w.Mode is set.
func checkVLANMode(file string, w config.WGPIO) error {
	if w.Mode != config.ModeFastPath {
		for _, k := range []string{"WANVLAN", "LANVLAN"} {
			if _, ok := w.Lines[k]; ok {
				return keyError(file, w.Lines, k, "", fmt.Sprintf("a VLAN of a trunk is served in Mode = fastpath only, not in Mode = %s", w.Mode))
			}
		}
	}
	return nil
}

// checkFile makes the checks of the file (and the flags that override its
// keys) alone that the mode w.Mode (set) needs, for up before anything
// is opened, and for check: a check passed the file and up refused it.
func checkFile(f *config.File, w config.WGPIO) error {
	if err := checkVLANMode(f.Name, w); err != nil {
		return err
	}
	switch w.Mode {
	case config.ModeFastPath, config.ModeCompat:
		if w.WAN == "" || w.LAN == "" {
			mode := "fast-path"
			if w.Mode == config.ModeCompat {
				mode = "compat"
			}
			return &config.Error{File: f.Name, Msg: mode + " mode needs WAN and LAN in the [WGPIO] section (or the -wan and -lan flags of up and check)"}
		}
		if w.WAN == w.LAN {
			return keyError(f.Name, w.Lines, "LAN", "lan",
				fmt.Sprintf("%q is the WAN interface too; WAN (toward the peers) and LAN (toward the hosts behind the gateway) must be two interfaces", w.LAN))
		}
	}
	switch w.Mode {
	case config.ModeFastPath, config.ModeCompat:
		if err := checkFrameMTU(f, w); err != nil {
			return err
		}
	}
	switch w.Mode {
	case config.ModeFastPath:
		return checkSourcePorts(f, w)
	case config.ModeCompat:
		if w.AddressMode == config.AddressOwned {
			return keyError(f.Name, w.Lines, "AddressMode", "",
				"owned is not available in Mode = compat; use shared (the kernel keeps the interfaces' addresses)")
		}
		if f.Interface.ListenPort == 0 {
			return &config.Error{File: f.Name, Key: "ListenPort",
				Msg: "missing from [Interface]; Mode = compat needs one (the WAN's XDP filter matches it)"}
		}
	}
	return nil
}

// checkFrameMTU refuses, in the modes whose outer packets leave through
// AF_XDP, a tunnel MTU whose full-size WAN frames no AF_XDP frame holds
// whatever the WAN: tunnelmtu.CheckFrames with the least outer overhead,
// IPv4's (the start checks it again against the WAN's families, where an
// IPv6-only WAN takes 20 bytes more), at the file's MTU line. A check of
// the file alone, so wgpio check makes it too (it said "ok" to a file up
// refused).
func checkFrameMTU(f *config.File, w config.WGPIO) error {
	mtu := f.Interface.MTU
	if mtu == 0 {
		mtu = fastpath.DefaultMTU
	}
	// The engine's floor (fastpath.New), here so that check and a
	// reload's next-start warning say it with the file's line, before
	// a start opens the ports and stops at it.
	if mtu < fastpath.MinMTU && w.Mode == config.ModeFastPath {
		return keyError(f.Name, f.Interface.Lines, "MTU", "", fmt.Sprintf(
			"%d is below the fast path's minimum, %d (every IPv4 host takes datagrams of that size, RFC 791)",
			mtu, fastpath.MinMTU))
	}
	_, err := tunnelmtu.CheckFrames(mtu, 0, "", w.WANVLAN, 0, true, false, afxdp.MaxFrameLen(dataplane.DefaultFrameSize), false)
	if err != nil {
		return keyError(f.Name, f.Interface.Lines, "MTU", "", err.Error())
	}
	return nil
}

// checkWANFrames is the start's check of the tunnel MTU's WAN frames
// against an AF_XDP frame (tunnelmtu.CheckFrames, as fastgw and compatgw
// make it) for the families the WAN has, v4 and v6, at the file's MTU
// line: with IPv6 on the WAN a tunnel MTU above 3,742 (3,738 on a VLAN)
// is refused by the start, and `wgpio check -system` said ok of it.
func checkWANFrames(f *config.File, w config.WGPIO, v4, v6 bool) error {
	mtu := f.Interface.MTU
	if mtu == 0 {
		mtu = fastpath.DefaultMTU
	}
	var vid uint16
	if w.Mode == config.ModeFastPath {
		vid = w.WANVLAN
	}
	if _, err := tunnelmtu.CheckFrames(mtu, 0, "", vid, 0, v4, v6, afxdp.MaxFrameLen(dataplane.DefaultFrameSize), false); err != nil {
		return keyError(f.Name, f.Interface.Lines, "MTU", "", err.Error())
	}
	return nil
}

// checkSourcePorts refuses, in fastpath mode, a SourcePorts range that
// does not start at the file's ListenPort: the gateway listens on the
// range's first port. A check of the file alone, so wgpio check makes it
// too.
func checkSourcePorts(f *config.File, w config.WGPIO) error {
	if w.SourcePorts.First != 0 && f.Interface.ListenPort != 0 && w.SourcePorts.First != f.Interface.ListenPort {
		return keyError(f.Name, w.Lines, "SourcePorts", "",
			fmt.Sprintf("must start at the ListenPort %d (the peers send to it; replies leave from the range above it)", f.Interface.ListenPort))
	}
	return nil
}
