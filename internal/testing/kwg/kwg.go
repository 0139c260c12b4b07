//go:build linux

package kwg

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/curve25519"

	"github.com/wgpio/wgpio/internal/topo"
)

// DefaultState is where Prepare caches the kernel, the initramfs and the
// guest's echo server when the caller names no directory: under /var/tmp,
// so that it survives reboots and CI re-runs on the same machine.
const DefaultState = "/var/tmp/wgpio-kwg"

// StateEnv overrides DefaultState.
const StateEnv = "WGPIO_KWG_STATE"

//go:embed build-initramfs.sh guest/init guest/kwg-wg-up
var recipe embed.FS

// Env is a prepared guest: the Debian kernel and an initramfs holding its
// wireguard.ko. Read-only after Prepare; safe for concurrent use.
type Env struct {
	State   string // cache directory
	KVer    string // kernel release, e.g. "6.1.0-57-amd64"
	Kernel  string // vmlinuz path
	Initrd  string // initramfs path
	Accel   string // "kvm" or "tcg"
	Prepare time.Duration
}

// Prepare fills the cache in state (default DefaultState): it downloads the
// Debian kernel package with `apt-get download` (running `apt-get update`
// once if the package lists are empty), unpacks it with dpkg-deb and runs
// depmod, builds kwgecho with the go command of this toolchain, and builds
// the initramfs with build-initramfs.sh. What is already cached is reused;
// the initramfs is named after a hash of its inputs, so it is rebuilt when
// the recipe or kwgecho change. An exclusive lock on state/.lock keeps
// concurrent callers apart. logf receives progress lines (may be nil).
//
// It needs root (depmod and mknod on the staging tree), apt-get, dpkg-deb,
// depmod, modprobe, cpio, gzip, a static /bin/busybox, wg and ip.
func Prepare(state string, logf func(format string, args ...any)) (*Env, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if state == "" {
		state = os.Getenv(StateEnv)
	}
	if state == "" {
		state = DefaultState
	}
	start := time.Now()
	if err := os.MkdirAll(filepath.Join(state, "debs"), 0o755); err != nil {
		return nil, fmt.Errorf("kwg: state directory: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(state, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kwg: lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("kwg: lock: %w", os.NewSyscallError("flock", err))
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	env := &Env{State: state, Accel: accel()}
	if err := env.kernel(logf); err != nil {
		return nil, err
	}
	echo := filepath.Join(state, "bin", "kwgecho")
	if err := buildEcho(echo); err != nil {
		return nil, err
	}
	if err := env.initramfs(echo, logf); err != nil {
		return nil, err
	}
	env.Prepare = time.Since(start)
	return env, nil
}

// accel returns the qemu accelerator: "tcg" (software emulation) unless
// KWG_ACCEL=kvm. The project's machines have a /dev/kvm that opens but runs
// no guest (nested virtualization off: the guest hangs before its first
// console line), so KVM is never picked on its own.
func accel() string {
	if os.Getenv("KWG_ACCEL") == "kvm" {
		return "kvm"
	}
	return "tcg"
}

// kernel finds or fetches the kernel tree under state/kroot.
func (e *Env) kernel(logf func(string, ...any)) error {
	kroot := filepath.Join(e.State, "kroot")
	if m, _ := filepath.Glob(filepath.Join(kroot, "boot", "vmlinuz-*")); len(m) > 0 {
		kver := strings.TrimPrefix(filepath.Base(m[0]), "vmlinuz-")
		if _, err := os.Stat(filepath.Join(kroot, "lib", "modules", kver, "modules.dep")); err == nil {
			e.KVer, e.Kernel = kver, m[0]
			return nil
		}
	}
	pkg := os.Getenv("KWG_KERNEL_PKG")
	if pkg == "" {
		var err error
		if pkg, err = kernelPackage(); err != nil {
			logf("kwg: %v; running apt-get update", err)
			if out, err := exec.Command("apt-get", "update", "-qq").CombinedOutput(); err != nil {
				return fmt.Errorf("kwg: apt-get update: %w: %s", err, out)
			}
			if pkg, err = kernelPackage(); err != nil {
				return err
			}
		}
	}
	kver := strings.TrimPrefix(pkg, "linux-image-")
	debs := filepath.Join(e.State, "debs")
	m, _ := filepath.Glob(filepath.Join(debs, pkg+"_*.deb"))
	if len(m) == 0 {
		logf("kwg: apt-get download %s", pkg)
		cmd := exec.Command("apt-get", "download", "-q", pkg)
		cmd.Dir = debs
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kwg: apt-get download %s: %w: %s", pkg, err, out)
		}
		if m, _ = filepath.Glob(filepath.Join(debs, pkg+"_*.deb")); len(m) == 0 {
			return fmt.Errorf("kwg: apt-get download %s left no .deb in %s", pkg, debs)
		}
	}
	tmp := kroot + ".tmp"
	os.RemoveAll(tmp)
	if out, err := exec.Command("dpkg-deb", "-x", m[0], tmp).CombinedOutput(); err != nil {
		return fmt.Errorf("kwg: dpkg-deb -x %s: %w: %s", m[0], err, out)
	}
	// The .deb ships no modules.dep (its postinst would make one).
	if out, err := exec.Command("depmod", "-b", tmp, kver).CombinedOutput(); err != nil {
		return fmt.Errorf("kwg: depmod: %w: %s", err, out)
	}
	os.RemoveAll(kroot)
	if err := os.Rename(tmp, kroot); err != nil {
		return fmt.Errorf("kwg: %w", err)
	}
	e.KVer, e.Kernel = kver, filepath.Join(kroot, "boot", "vmlinuz-"+kver)
	if _, err := os.Stat(e.Kernel); err != nil {
		return fmt.Errorf("kwg: %s has no kernel: %w", pkg, err)
	}
	return nil
}

// kernelPackage returns the package linux-image-amd64 depends on.
func kernelPackage() (string, error) {
	out, _ := exec.Command("apt-cache", "depends", "linux-image-amd64").Output()
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") {
			return f[1], nil
		}
	}
	return "", errors.New("kwg: cannot resolve linux-image-amd64 with apt-cache")
}

// buildEcho builds the guest's static echo server (the go build cache
// makes this quick when nothing changed).
func buildEcho(out string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		// The official tarball's place, for a PATH without it (sudo's
		// secure_path).
		goBin = "/usr/local/go/bin/go"
	}
	cmd := exec.Command(goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", out, "github.com/wgpio/wgpio/internal/testing/kwg/kwgecho")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kwg: go build kwgecho: %w: %s", err, out)
	}
	return nil
}

// initramfs builds (or reuses) the initramfs for the inputs' hash.
func (e *Env) initramfs(echo string, logf func(string, ...any)) error {
	h := sha256.New()
	io.WriteString(h, e.KVer+"\n")
	for _, name := range []string{"build-initramfs.sh", "guest/init", "guest/kwg-wg-up"} {
		b, _ := recipe.ReadFile(name)
		h.Write(b)
	}
	b, err := os.ReadFile(echo)
	if err != nil {
		return fmt.Errorf("kwg: %w", err)
	}
	h.Write(b)
	sum := hex.EncodeToString(h.Sum(nil))[:12]
	e.Initrd = filepath.Join(e.State, "initramfs-"+e.KVer+"-"+sum+".cpio.gz")
	if _, err := os.Stat(e.Initrd); err == nil {
		return nil
	}
	logf("kwg: building %s", e.Initrd)
	dir, err := os.MkdirTemp("", "kwg-recipe-")
	if err != nil {
		return fmt.Errorf("kwg: %w", err)
	}
	defer os.RemoveAll(dir)
	for _, name := range []string{"build-initramfs.sh", "guest/init", "guest/kwg-wg-up"} {
		b, _ := recipe.ReadFile(name)
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o755); err != nil {
			return fmt.Errorf("kwg: %w", err)
		}
	}
	cmd := exec.Command(filepath.Join(dir, "build-initramfs.sh"), filepath.Join(e.State, "kroot"), e.KVer, e.Initrd)
	cmd.Env = append(os.Environ(), "KWG_ECHO="+echo)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kwg: build initramfs: %w: %s", err, out)
	}
	// Old initramfs images (other inputs) are not needed any more.
	old, _ := filepath.Glob(filepath.Join(e.State, "initramfs-*.cpio.gz"))
	for _, p := range old {
		if p != e.Initrd {
			os.Remove(p)
		}
	}
	return nil
}

// Key is a WireGuard X25519 key (private or public), 32 bytes.
type Key = [32]byte

// NewPrivateKey returns a random clamped private key.
func NewPrivateKey() Key {
	var k Key
	rand.Read(k[:])
	k[0] &= 248
	k[31] = (k[31] & 127) | 64
	return k
}

// PublicKey returns the public key of priv.
func PublicKey(priv Key) Key {
	pub, _ := curve25519.X25519(priv[:], curve25519.Basepoint)
	var k Key
	copy(k[:], pub)
	return k
}

// Base64 is the key as wg(8) writes it.
func Base64(k Key) string { return base64.StdEncoding.EncodeToString(k[:]) }

// GuestConfig configures one guest and the tap that connects it.
type GuestConfig struct {
	// NS is where the tap is made and qemu runs (TUNSETIFF finds the tap by
	// name in the caller's namespace).
	NS *topo.NS
	// Tap is the tap's name (unique on the host, at most 15 bytes).
	Tap string
	// TapAddr, if valid, is put on the tap (the host end of the link).
	TapAddr netip.Prefix
	// GuestAddr is eth0's address in the guest; GuestTunnel is wg0's.
	GuestAddr, GuestTunnel netip.Prefix
	// GuestPort is wg0's listen port (default 51820).
	GuestPort uint16
	// PrivateKey is the guest's private key.
	PrivateKey Key
	// Peer is the one userspace peer: its public key, endpoint and the
	// guest's allowed IPs for it (each also routed into wg0).
	PeerPublicKey  Key
	PeerEndpoint   netip.AddrPort
	PeerAllowedIPs []netip.Prefix
	// MTU of wg0 (default 1420).
	MTU int
	// BootTimeout bounds qemu start to KWG_READY (default 180 s).
	BootTimeout time.Duration
}

// Guest is a running qemu guest. Methods are safe for concurrent use, but
// the command channel runs one command at a time.
type Guest struct {
	cfg     GuestConfig
	env     *Env
	dir     string
	cmd     *exec.Cmd
	done    chan struct{}
	mu      sync.Mutex // serializes Ctl
	Boot    time.Duration
	closeMu sync.Once
}

// Tap is the name of the guest's tap device.
func (g *Guest) Tap() string { return g.cfg.Tap }

// Dir is the run directory: console.log, qemu.log, ctl.sock.
func (g *Guest) Dir() string { return g.dir }

// Boot makes the tap, starts qemu inside cfg.NS and waits for the guest's
// KWG_READY line (kernel up, modules loaded, wg0 configured, echo server on
// port 7). The guest's network traffic stays on the tap in cfg.NS. Close
// stops qemu and deletes the tap; on error, Boot has already cleaned up.
func Boot(env *Env, cfg GuestConfig) (_ *Guest, err error) {
	if cfg.GuestPort == 0 {
		cfg.GuestPort = 51820
	}
	if cfg.MTU == 0 {
		cfg.MTU = 1420
	}
	if cfg.BootTimeout == 0 {
		cfg.BootTimeout = 180 * time.Second
	}
	dir, err := os.MkdirTemp("", "kwg-run-")
	if err != nil {
		return nil, fmt.Errorf("kwg: %w", err)
	}
	g := &Guest{cfg: cfg, env: env, dir: dir, done: make(chan struct{})}
	tapMade := false
	defer func() {
		if err != nil {
			g.stop()
			if tapMade {
				cfg.NS.Run("ip", "link", "del", cfg.Tap)
			}
		}
	}()
	if _, err := cfg.NS.Run("ip", "tuntap", "add", "dev", cfg.Tap, "mode", "tap"); err != nil {
		return nil, fmt.Errorf("kwg: make tap: %w", err)
	}
	tapMade = true
	if cfg.TapAddr.IsValid() {
		if err := cfg.NS.AddAddr(cfg.Tap, cfg.TapAddr.String()); err != nil {
			return nil, fmt.Errorf("kwg: %w", err)
		}
	}
	if _, err := cfg.NS.Run("ip", "link", "set", cfg.Tap, "up"); err != nil {
		return nil, fmt.Errorf("kwg: tap up: %w", err)
	}
	allowed := make([]string, len(cfg.PeerAllowedIPs))
	for i, p := range cfg.PeerAllowedIPs {
		allowed[i] = p.String()
	}
	cmdline := []string{
		"console=ttyS0", "quiet", "panic=1", "wireguard.dyndbg=+p",
		"kwg.ul=" + cfg.GuestAddr.String(), "kwg.tun=" + cfg.GuestTunnel.String(),
		"kwg.priv=" + Base64(cfg.PrivateKey), "kwg.port=" + strconv.Itoa(int(cfg.GuestPort)),
		"kwg.peerpub=" + Base64(cfg.PeerPublicKey), "kwg.peerep=" + cfg.PeerEndpoint.String(),
		"kwg.peerallowed=" + strings.Join(allowed, ","), "kwg.mtu=" + strconv.Itoa(cfg.MTU),
		"kwg.keepalive=0",
	}
	// A fixed MAC from the locally administered range (52:54:00 is qemu's),
	// and no vnet header: the guest then gets no checksum offload and puts
	// full checksums on every frame, as a real NIC's peer would see them.
	qemu := []string{
		"netns", "exec", cfg.NS.Name, "qemu-system-x86_64",
		"-nodefaults", "-display", "none", "-vga", "none", "-no-reboot",
		"-accel", env.Accel, "-m", "256M", "-smp", "1",
		"-kernel", env.Kernel, "-initrd", env.Initrd, "-append", strings.Join(cmdline, " "),
		"-serial", "file:" + filepath.Join(dir, "console.log"),
		"-serial", "unix:" + filepath.Join(dir, "ctl.sock") + ",server=on,wait=off",
		"-netdev", "tap,id=n0,ifname=" + cfg.Tap + ",script=no,downscript=no,vnet_hdr=off",
		"-device", "virtio-net-pci,netdev=n0,mac=52:54:00:4b:57:47",
		"-device", "virtio-rng-pci",
	}
	qlog, err := os.Create(filepath.Join(dir, "qemu.log"))
	if err != nil {
		return nil, fmt.Errorf("kwg: %w", err)
	}
	g.cmd = exec.Command("ip", qemu...)
	g.cmd.Stdout, g.cmd.Stderr = qlog, qlog
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := g.cmd.Start(); err != nil {
		qlog.Close()
		return nil, fmt.Errorf("kwg: start qemu: %w", err)
	}
	go func() {
		g.cmd.Wait()
		qlog.Close()
		close(g.done)
	}()
	deadline := time.Now().Add(cfg.BootTimeout)
	for {
		if strings.Contains(g.Console(), "KWG_READY") {
			break
		}
		select {
		case <-g.done:
			return nil, fmt.Errorf("kwg: qemu exited before the guest was ready: %s", g.QemuLog())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("kwg: guest not ready after %v (accel %s); console:\n%s\nqemu:\n%s", cfg.BootTimeout, env.Accel, tail(g.Console(), 3000), g.QemuLog())
		}
	}
	g.Boot = time.Since(start)
	if m := regexp.MustCompile(`KWG: .*ERROR.*`).FindString(g.Console()); m != "" {
		return nil, fmt.Errorf("kwg: guest init: %s", m)
	}
	// The guest's command loop may not have put ttyS1 into raw mode yet
	// when KWG_READY appears (the loop is a background subshell, and TCG
	// under load is slow), so a first command can be lost: try a few times.
	for i := 0; ; i++ {
		_, err := g.Ctl(10*time.Second, "true")
		if err == nil {
			break
		}
		if i == 5 {
			return nil, fmt.Errorf("kwg: command channel: %w; console:\n%s", err, tail(g.Console(), 3000))
		}
	}
	return g, nil
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// Console returns the guest's serial console so far.
func (g *Guest) Console() string {
	b, _ := os.ReadFile(filepath.Join(g.dir, "console.log"))
	return string(b)
}

// QemuLog returns qemu's own output.
func (g *Guest) QemuLog() string {
	b, _ := os.ReadFile(filepath.Join(g.dir, "qemu.log"))
	return string(b)
}

// Ctl runs a busybox sh command line (no newlines) in the guest through
// the ttyS1 command channel and returns its combined output. A non-zero
// exit status is an error that carries the output.
func (g *Guest) Ctl(timeout time.Duration, cmd string) (string, error) {
	if strings.ContainsAny(cmd, "\r\n") {
		return "", errors.New("kwg: command has a newline")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c, err := net.DialTimeout("unix", filepath.Join(g.dir, "ctl.sock"), 5*time.Second)
	if err != nil {
		return "", fmt.Errorf("kwg: command channel: %w", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	var idb [6]byte
	rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	if _, err := fmt.Fprintf(c, "%s %s\n", id, cmd); err != nil {
		return "", fmt.Errorf("kwg: command channel: %w", err)
	}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var out strings.Builder
	started := false
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "KWG_BEGIN "+id {
			started = true
			continue
		}
		if rest, ok := strings.CutPrefix(line, "KWG_END "+id+" "); ok {
			if rc := strings.TrimSpace(rest); rc != "0" {
				return out.String(), fmt.Errorf("kwg: guest %q: exit status %s: %s", cmd, rc, out.String())
			}
			return out.String(), nil
		}
		if started {
			out.WriteString(line + "\n")
		}
	}
	return out.String(), fmt.Errorf("kwg: guest %q: no reply: %v: %s", cmd, sc.Err(), out.String())
}

// WireGuardLog returns and clears the guest kernel's WireGuard messages
// (dynamic debug is on: handshakes, keypairs, invalid packets).
func (g *Guest) WireGuardLog() (string, error) {
	out, err := g.Ctl(30*time.Second, "dmesg -c | grep -i wireguard; true")
	return out, err
}

// DumpPeer is the peer line of `wg show wg0 dump` in the guest.
type DumpPeer struct {
	PublicKey     string
	Endpoint      string
	AllowedIPs    string
	LastHandshake int64 // Unix seconds, 0 = never
	RxBytes       uint64
	TxBytes       uint64
	Line          string
}

// Dump returns the guest's view of the peer with public key pub.
func (g *Guest) Dump(pub Key) (DumpPeer, error) {
	out, err := g.Ctl(30*time.Second, "wg show wg0 dump")
	if err != nil {
		return DumpPeer{}, err
	}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Split(l, "\t")
		if len(f) < 8 || f[0] != Base64(pub) {
			continue
		}
		d := DumpPeer{PublicKey: f[0], Endpoint: f[2], AllowedIPs: f[3], Line: l}
		d.LastHandshake, _ = strconv.ParseInt(f[4], 10, 64)
		d.RxBytes, _ = strconv.ParseUint(f[5], 10, 64)
		d.TxBytes, _ = strconv.ParseUint(f[6], 10, 64)
		return d, nil
	}
	return DumpPeer{}, fmt.Errorf("kwg: no peer %s in the guest's wg show wg0 dump:\n%s", Base64(pub), out)
}

func (g *Guest) stop() {
	if g.cmd == nil || g.cmd.Process == nil {
		os.RemoveAll(g.dir)
		return
	}
	// qemu runs in its own process group (Setpgid): ip netns exec execs
	// qemu in place, so the group is just qemu.
	syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
	}
	os.RemoveAll(g.dir)
}

// Close stops qemu, deletes the tap and removes the run directory (read
// Console and QemuLog before). Safe to call more than once.
func (g *Guest) Close() {
	g.closeMu.Do(func() {
		g.stop()
		g.cfg.NS.Run("ip", "link", "del", g.cfg.Tap)
	})
}

// UDPEcho sends one datagram of each size to addr (the guest's echo
// server) from inside ns and requires each echo back byte for byte,
// resending every 2 s until timeout.
func UDPEcho(ns *topo.NS, addr netip.AddrPort, sizes []int, timeout time.Duration) error {
	var c net.Conn
	if err := ns.Do(func() (err error) {
		c, err = net.Dial("udp", addr.String())
		return err
	}); err != nil {
		return fmt.Errorf("udp echo: %w", err)
	}
	defer c.Close()
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 65536)
	for _, size := range sizes {
		payload := make([]byte, size)
		rand.Read(payload)
		ok := false
		for !ok && time.Now().Before(deadline) {
			if _, err := c.Write(payload); err != nil {
				return fmt.Errorf("udp echo: write %d bytes: %w", size, err)
			}
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			for {
				n, err := c.Read(buf)
				if err != nil {
					break // timeout or ICMP error: send again
				}
				if n == size && bytes.Equal(buf[:n], payload) {
					ok = true
					break
				}
			}
		}
		if !ok {
			return fmt.Errorf("udp echo of %d bytes to %v: no matching reply in %v", size, addr, timeout)
		}
	}
	return nil
}

// TCPEcho sends n random bytes to addr (the guest's echo server) from
// inside ns, reads n bytes back and compares them byte for byte.
func TCPEcho(ns *topo.NS, addr netip.AddrPort, n int, timeout time.Duration) (time.Duration, error) {
	var c net.Conn
	start := time.Now()
	if err := ns.Do(func() (err error) {
		c, err = net.DialTimeout("tcp", addr.String(), timeout)
		return err
	}); err != nil {
		return 0, fmt.Errorf("tcp echo: %w", err)
	}
	defer c.Close()
	c.SetDeadline(start.Add(timeout))
	data := make([]byte, n)
	rand.Read(data)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		errc <- err
	}()
	got := make([]byte, n)
	if _, err := io.ReadFull(c, got); err != nil {
		return 0, fmt.Errorf("tcp echo: read after %v: %w", time.Since(start), err)
	}
	if err := <-errc; err != nil {
		return 0, fmt.Errorf("tcp echo: write: %w", err)
	}
	if !bytes.Equal(data, got) {
		return 0, fmt.Errorf("tcp echo of %d bytes: the echo differs", n)
	}
	return time.Since(start), nil
}
