//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestDemoBinary runs `go run ./cmd/wgpio demo` as a user on a fresh machine
// would, for a few seconds, with a PATH that holds only the Go toolchain (no
// ip, ethtool, sysctl or wg), and checks that traffic flowed both ways, that it says how
// to watch it, and that everything it made is gone.
func TestDemoBinary(t *testing.T) {
	testenv.Root(t)
	testenv.Tool(t, "ip", "iproute2") // for xdpLinks, not the demo
	goBin := testenv.Tool(t, "go", "golang (or the toolchain from go.dev/dl)")
	xdpBefore := xdpLinks(t)
	var out bytes.Buffer
	// The README's first command, as a fresh machine runs it: PATH holds
	// the Go toolchain only (the Go settings of this run are kept, so that
	// it shares the build cache).
	cmd := exec.Command(goBin, "run", ".", "demo", "-duration", "4s", "-rate", "5000")
	cmd.Env = []string{"PATH=" + filepath.Dir(goBin), "HOME=" + os.Getenv("HOME")}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GO") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("go run ./cmd/wgpio demo: %v\n%s", err, out.String())
	}
	t.Logf("demo output:\n%s", out.String())
	s := out.String()
	if !strings.Contains(s, "total: A→B") {
		t.Fatalf("demo printed no total line")
	}
	for _, want := range []string{"wg show wgpa", "wgpio stats wgpa", "wireguard-tools", "where the datagrams went: A→B host A sent", "drops counted: by wgpio: "} {
		if !strings.Contains(s, want) {
			t.Errorf("demo output lacks %q (how to watch it, where the datagrams went)", want)
		}
	}
	var sab, rab, sba, rba uint64
	line := s[strings.Index(s, "total:"):]
	if _, err := fmt.Sscanf(line, "total: A→B %d sent, %d received; B→A %d sent, %d received;", &sab, &rab, &sba, &rba); err != nil {
		t.Fatalf("parse %q: %v", line, err)
	}
	if rab == 0 || rba == 0 {
		t.Errorf("traffic A→B %d received, B→A %d received; want both > 0", rab, rba)
	}
	// The namespaces the demo names on its total line must be gone (other
	// programs on the machine may make and remove namespaces meanwhile:
	// only the demo's own are checked).
	_, names, ok := strings.Cut(line, "removing the namespaces ")
	names, _, _ = strings.Cut(names, "\n")
	if !ok || len(strings.Fields(names)) != 4 {
		t.Fatalf("the total line %q does not name the demo's four namespaces", line)
	}
	for _, ns := range strings.Fields(names) {
		if _, err := os.Stat("/run/netns/" + ns); !os.IsNotExist(err) {
			t.Errorf("namespace %s still there after the demo (stat: %v)", ns, err)
		}
	}
	if after := xdpLinks(t); after != xdpBefore {
		t.Errorf("bpf links with XDP before %d, after %d", xdpBefore, after)
	}
}

// TestDemoCancel stops the demo through its context (as Ctrl-C does) once
// its traffic has run for a while, and checks the namespaces are gone.
func TestDemoCancel(t *testing.T) {
	testenv.Root(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Cancel 1.5 s after the traffic starts, not at a fixed time after the
	// call: building namespaces and the first handshake take longer on a
	// loaded machine, and a cancel before traffic proves nothing.
	seen := make(chan struct{})
	out := &lineWatch{want: "starting the traffic", seen: seen}
	go func() {
		select {
		case <-seen:
			time.Sleep(1500 * time.Millisecond)
		case <-time.After(2 * time.Minute):
		}
		cancel()
	}()
	res, err := runDemo(ctx, demoOptions{Rate: 2000}, out)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	if res.ReceivedAB == 0 || res.ReceivedBA == 0 {
		t.Errorf("received A→B %d, B→A %d; want both > 0\n%s", res.ReceivedAB, res.ReceivedBA, out.String())
	}
	for _, ns := range res.Namespaces {
		if _, err := os.Stat("/run/netns/" + ns); !os.IsNotExist(err) {
			t.Errorf("namespace %s still there after Run", ns)
		}
	}
}

// lineWatch is the demo's output: it keeps what is written and closes seen
// once want has appeared. Safe for one writer and later readers.
type lineWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if w.seen != nil && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
		w.seen = nil
	}
	return n, err
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// xdpLinks counts bpf links of type xdp (bpftool-free: /proc is enough for
// programs, but links are counted through the fdinfo of nothing we hold; so
// count XDP programs attached to any interface of the root namespace via ip).
func xdpLinks(t *testing.T) int {
	out, err := exec.Command("ip", "-d", "link", "show").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(out), "prog/xdp")
}

// TestDemoWithoutCapabilities: `wgpio demo` as root without root's
// capabilities (a container's root, capsh --drop) names the ones it
// lacks and what each is for, before it makes anything; it failed at its
// first mount with "make /run/netns a shared mount point, as ip netns add
// does: operation not permitted", which named no capability.
func TestDemoWithoutCapabilities(t *testing.T) {
	testenv.Root(t)
	setpriv := testenv.Tool(t, "setpriv", "util-linux")
	out, err := exec.Command(setpriv, "--bounding-set=-all", "--inh-caps=-all", "--", wgpioBin, "demo", "-duration", "2s").CombinedOutput()
	if err == nil {
		t.Fatalf("demo without capabilities exited 0:\n%s", out)
	}
	for _, want := range []string{"demo: runs as root but without CAP_SYS_ADMIN (to create network namespaces under /run/netns), CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_BPF"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
