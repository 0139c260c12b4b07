package demo

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestDemoBinary runs `wgpio demo` as a user would, for a few seconds, and
// checks that traffic flowed both ways and that everything it made is gone.
func TestDemoBinary(t *testing.T) {
	testenv.Root(t)
	testenv.Tool(t, "ethtool", "ethtool")
	bin := filepath.Join(t.TempDir(), "wgpio")
	build := exec.Command("go", "build", "-o", bin, "github.com/wgpio/wgpio/cmd/wgpio")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/wgpio: %v\n%s", err, out)
	}
	before := netnsList(t)
	xdpBefore := xdpLinks(t)
	var out bytes.Buffer
	cmd := exec.Command(bin, "demo", "-duration", "4s", "-rate", "5000")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("wgpio demo: %v\n%s", err, out.String())
	}
	t.Logf("demo output:\n%s", out.String())
	s := out.String()
	if !strings.Contains(s, "total: A→B") {
		t.Fatalf("demo printed no total line")
	}
	var sab, rab, sba, rba uint64
	line := s[strings.Index(s, "total:"):]
	if _, err := fmtSscanf(line, &sab, &rab, &sba, &rba); err != nil {
		t.Fatalf("parse %q: %v", line, err)
	}
	if rab == 0 || rba == 0 {
		t.Errorf("traffic A→B %d received, B→A %d received; want both > 0", rab, rba)
	}
	if after := netnsList(t); len(after) != len(before) {
		t.Errorf("namespaces before %v, after %v: the demo left some behind", before, after)
	}
	if after := xdpLinks(t); after != xdpBefore {
		t.Errorf("bpf links with XDP before %d, after %d", xdpBefore, after)
	}
}

// TestDemoCancel stops the demo through its context (as Ctrl-C does) and
// checks the namespaces are gone.
func TestDemoCancel(t *testing.T) {
	testenv.Root(t)
	testenv.Tool(t, "ethtool", "ethtool")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(2500 * time.Millisecond); cancel() }()
	var out bytes.Buffer
	res, err := Run(ctx, Options{Rate: 2000}, &out)
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

func netnsList(t *testing.T) []string {
	ents, _ := os.ReadDir("/run/netns")
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "wgd") {
			names = append(names, e.Name())
		}
	}
	return names
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
