//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/wgpio/wgpio/config"
)

// Linux capability numbers (include/uapi/linux/capability.h).
const (
	capNetBindService = 10
	capNetAdmin       = 12
	capNetRaw         = 13
	capIPCLock        = 14
	capSysAdmin       = 21
	capBPF            = 39 // Linux 5.8+
)

type capability struct {
	bit  uint
	name string
	why  string
}

// fastpathCaps are what the fast path needs: CAP_NET_ADMIN to attach XDP
// programs, set up the exception TUN, addresses and routes; CAP_NET_RAW to
// open AF_XDP sockets; CAP_BPF to load the XDP program and create its maps.
var fastpathCaps = []capability{
	{capNetAdmin, "CAP_NET_ADMIN", "attach XDP programs, create the exception TUN"},
	{capNetRaw, "CAP_NET_RAW", "open AF_XDP sockets"},
	{capBPF, "CAP_BPF", "load the XDP program and its maps"},
}

// mqtunCaps are what compat-mqtun needs: CAP_NET_ADMIN to create the
// multi-queue TUN and give it its addresses and routes.
var mqtunCaps = []capability{
	{capNetAdmin, "CAP_NET_ADMIN", "create the multi-queue TUN, its addresses and routes"},
}

// demoCaps are what `wgpio demo` needs: CAP_SYS_ADMIN to create its
// network namespaces (unshare, and the bind mounts under /run/netns, as
// ip netns add makes them), and the fast path's for its gateway.
var demoCaps = append([]capability{{capSysAdmin, "CAP_SYS_ADMIN", "create network namespaces under /run/netns"}}, fastpathCaps...)

// effectiveCaps reads the effective capability set of this process from
// /proc/self/status (proc(5), "CapEff").
func effectiveCaps() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("no CapEff line in /proc/self/status")
}

// checkCaps returns an error naming every capability of want the process
// lacks. If the set cannot be read, it returns nil and lets the kernel
// answer.
func checkCaps(want []capability) error {
	missing := missingCaps(want)
	if len(missing) == 0 {
		return nil
	}
	names := make([]string, len(want))
	setpriv := make([]string, len(want))
	for i, c := range want {
		names[i] = c.name
		setpriv[i] = "+" + strings.ToLower(strings.TrimPrefix(c.name, "CAP_"))
	}
	all := names[len(names)-1]
	if len(names) > 1 {
		all = strings.Join(names[:len(names)-1], ", ") + " and " + all
	}
	sp := strings.Join(setpriv, ",")
	return fmt.Errorf("missing privileges: %s; run as root, or grant %s (systemd: AmbientCapabilities=, see dist/wgpio.service; by hand: setpriv --inh-caps=%s --ambient-caps=%s ...)", strings.Join(missing, ", "), all, sp, sp)
}

// missingCaps names each capability of want the process lacks, with what
// it is for ("CAP_NET_RAW (to open AF_XDP sockets)"); none if the set
// cannot be read, to let the kernel answer.
func missingCaps(want []capability) []string {
	eff, err := effectiveCaps()
	if err != nil {
		return nil
	}
	var missing []string
	for _, c := range want {
		if eff&(1<<c.bit) == 0 {
			missing = append(missing, c.name+" (to "+c.why+")")
		}
	}
	return missing
}

// checkPortPrivilege refuses a ListenPort below the namespace's first
// unprivileged port (net.ipv4.ip_unprivileged_port_start, 1024 by default:
// 443 and 53 are ports WireGuard is run on to pass firewalls) to a process
// without CAP_NET_BIND_SERVICE, in the modes whose kernel sockets bind it
// (shared address mode's sockets for the datagrams the kernel reassembles,
// compat-mqtun's own): the fast path came up with a warning that its
// socket failed, and every fragmented WireGuard datagram to the port was
// lost. If the capabilities cannot be read it returns nil and lets the
// kernel answer.
func checkPortPrivilege(f *config.File, w config.WGPIO) error {
	port := int(f.Interface.ListenPort)
	if port == 0 || w.Mode != config.ModeCompatMQTUN && w.AddressMode == config.AddressOwned {
		return nil
	}
	start := 1024
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			start = n
		}
	}
	if port >= start {
		return nil
	}
	if eff, err := effectiveCaps(); err != nil || eff&(1<<capNetBindService) != 0 {
		return nil
	}
	return keyError(f.Name, f.Interface.Lines, "ListenPort", "", fmt.Sprintf(
		"port %d is below net.ipv4.ip_unprivileged_port_start (%d): binding it needs CAP_NET_BIND_SERVICE "+
			"(systemd: in AmbientCapabilities= and CapabilityBoundingSet=, as dist/wgpio.service has it; "+
			"by hand: +net_bind_service among setpriv's --inh-caps and --ambient-caps), "+
			"or let every user bind it in the gateway's namespace: sysctl -w net.ipv4.ip_unprivileged_port_start=%d",
		port, start, port))
}
