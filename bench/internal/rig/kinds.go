//go:build linux

package rig

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Gateway is what a kind needs to know to configure one gateway.
type Gateway struct {
	Name       string // "gw1" or "gw2"
	LAN, WAN   string // interface names in the gateway's namespace
	TUN        string // TUN name, unique on the machine (UAPI sockets are shared)
	PrivateKey [32]byte
	PeerPublic [32]byte
	ListenPort int
	Endpoint   string // peer's WAN address:port
	TunnelAddr string // own tunnel address, CIDR
	AllowedIPs []string
	MTU        int
	Queues     int    // queues for the kind to use
	CPUs       string // CPU list the process runs on ("" = all)
}

// Kind is one gateway configuration under test.
type Kind struct {
	// Name is the configuration's name in flags and reports.
	Name string
	// Desc says what it is, for the report.
	Desc string
	// Binary is the program it runs: "wggw" (bench/cmd/wggw) or "wgpio"
	// (cmd/wgpio).
	Binary string
	// KernelRoutes: the rig addresses the TUN and routes the far LAN
	// through it (wireguard-go kinds); otherwise the gateway takes the
	// LAN's traffic itself (wgpio kinds, through XDP).
	KernelRoutes bool
	// MinQueues is the least number of veth queues the kind needs.
	MinQueues int
	// GWQueues is the number of queues gateway 1 serves (0: all the veth
	// has). With fewer than the veth has, the rig steers the traffic
	// toward gateway 1 onto queues 0..GWQueues-1 (generator TX queues and
	// XPS on the sending ends), as a NIC with that many queues would get
	// it.
	GWQueues int
	// Command writes the kind's configuration for g into dir and returns
	// the program's arguments (after the binary).
	Command func(g Gateway, dir string) ([]string, error)
}

// Kinds returns the known gateway kinds for veth queues q, in report order.
// The first is the reference the ratios are taken to.
func Kinds(q int) []Kind {
	mq := max(q, 2)
	return []Kind{
		{
			Name: "wg-tun", Desc: "stock wireguard-go, kernel TUN + UDP sockets",
			Binary: "wggw", KernelRoutes: true, MinQueues: 1,
			Command: func(g Gateway, dir string) ([]string, error) { return wggwArgs(g, dir, 0) },
		},
		{
			Name: "wg-mqtun", Desc: fmt.Sprintf("stock wireguard-go, multi-queue TUN (%d queues) + UDP sockets", mq),
			Binary: "wggw", KernelRoutes: true, MinQueues: 1,
			Command: func(g Gateway, dir string) ([]string, error) { return wggwArgs(g, dir, mq) },
		},
		{
			Name: "wgpio-compat", Desc: fmt.Sprintf("stock wireguard-go on wgpio bind + tundev (AF_XDP, %d queues)", q),
			Binary: "wgpio", MinQueues: 1,
			Command: func(g Gateway, dir string) ([]string, error) { return wgpioArgs(g, dir, "compat", q) },
		},
		{
			Name: "wgpio-fastpath-1q", Desc: "wgpio fast path, 1 queue",
			Binary: "wgpio", MinQueues: 1, GWQueues: 1,
			Command: func(g Gateway, dir string) ([]string, error) { return wgpioArgs(g, dir, "fastpath", 1) },
		},
		{
			Name: "wgpio-fastpath-2q", Desc: "wgpio fast path, 2 queues",
			Binary: "wgpio", MinQueues: 2, GWQueues: 2,
			Command: func(g Gateway, dir string) ([]string, error) { return wgpioArgs(g, dir, "fastpath", 2) },
		},
	}
}

// Reference is the configuration ratios are taken to.
const Reference = "wg-tun"

// UAPI renders g's WireGuard settings as a UAPI set=1 body
// (https://www.wireguard.com/xplatform/#configuration-protocol).
func UAPI(g Gateway) string {
	var b strings.Builder
	fmt.Fprintf(&b, "private_key=%s\nlisten_port=%d\nreplace_peers=true\n", hex.EncodeToString(g.PrivateKey[:]), g.ListenPort)
	fmt.Fprintf(&b, "public_key=%s\nendpoint=%s\nreplace_allowed_ips=true\n", hex.EncodeToString(g.PeerPublic[:]), g.Endpoint)
	for _, a := range g.AllowedIPs {
		fmt.Fprintf(&b, "allowed_ip=%s\n", a)
	}
	return b.String()
}

func wggwArgs(g Gateway, dir string, queues int) ([]string, error) {
	p := filepath.Join(dir, g.Name+".uapi")
	if err := os.WriteFile(p, []byte(UAPI(g)), 0o600); err != nil {
		return nil, fmt.Errorf("write uapi config: %w", err)
	}
	return []string{"-tun", g.TUN, "-mtu", strconv.Itoa(g.MTU), "-queues", strconv.Itoa(queues), "-uapi", p}, nil
}

// WGPIOConfig renders g as a wg-quick style file with a [WGPIO] section
// (the format of package config).
func WGPIOConfig(g Gateway, mode string, queues int) string {
	var b strings.Builder
	b64 := base64.StdEncoding.EncodeToString
	fmt.Fprintf(&b, "# written by the bench rig (bench/internal/rig)\n[Interface]\nPrivateKey = %s\nListenPort = %d\nAddress = %s\nMTU = %d\n\n",
		b64(g.PrivateKey[:]), g.ListenPort, g.TunnelAddr, g.MTU)
	fmt.Fprintf(&b, "[WGPIO]\nMode = %s\nWAN = %s\nLAN = %s\nAddressMode = shared\nQueues = %d\n", mode, g.WAN, g.LAN, queues)
	if g.CPUs != "" {
		fmt.Fprintf(&b, "CPUs = %s\n", g.CPUs)
	}
	fmt.Fprintf(&b, "SourcePorts = %d\n\n", g.ListenPort)
	fmt.Fprintf(&b, "[Peer]\nPublicKey = %s\nAllowedIPs = %s\nEndpoint = %s\n", b64(g.PeerPublic[:]), strings.Join(g.AllowedIPs, ", "), g.Endpoint)
	return b.String()
}

func wgpioArgs(g Gateway, dir, mode string, queues int) ([]string, error) {
	// The file name is the gateway's name, which names its UAPI socket in
	// /var/run/wireguard (shared by all namespaces): make it unique.
	p := filepath.Join(dir, g.TUN+".conf")
	if err := os.WriteFile(p, []byte(WGPIOConfig(g, mode, queues)), 0o600); err != nil {
		return nil, fmt.Errorf("write wgpio config: %w", err)
	}
	return []string{"up", "-c", p}, nil
}

// buildBinaries builds bench/cmd/wggw and cmd/wgpio into dir with `go
// build`, from the module root. It returns the path of each binary that
// built and, for each that did not, why.
func buildBinaries(dir string, progress func(string, ...any)) (paths map[string]string, missing map[string]string, err error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, nil, err
	}
	paths, missing = map[string]string{}, map[string]string{}
	for _, b := range []struct{ name, pkg string }{{"wggw", "./bench/cmd/wggw"}, {"wgpio", "./cmd/wgpio"}} {
		progress("building %s (%s)", b.name, b.pkg)
		dst := filepath.Join(dir, b.name)
		cmd := exec.Command("go", "build", "-o", dst, b.pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			missing[b.name] = "binary not available: " + firstError(string(out), err)
			continue
		}
		paths[b.name] = dst
	}
	return paths, missing, nil
}

// firstError is the first line of go build's output that is not a
// "# package" heading, or err.
func firstError(out string, err error) string {
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return err.Error()
}

// moduleRoot is the directory of the go.mod that `go env GOMOD` names from
// the current directory.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the wgpio module: run from the repository")
	}
	return filepath.Dir(mod), nil
}

// ModuleRoot returns the wgpio module's root directory (from go env GOMOD).
func ModuleRoot() (string, error) { return moduleRoot() }
