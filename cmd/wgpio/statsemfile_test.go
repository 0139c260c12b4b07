//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// statsEMFILEEnv names the stats socket of statsEMFILE, the child of
// TestStatsOutlivesEMFILE.
const statsEMFILEEnv = "WGPIO_TEST_STATS_EMFILE"

// statsEMFILE serves `wgpio stats` as name, then takes every file
// descriptor its limit allows and says "full" on stdout; on a line on
// stdin it frees them, and it exits when stdin ends. Its log goes to
// stderr.
func statsEMFILE(name string) {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	stop, err := serveStats(log, name, func() any { return "ok" })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer stop()
	// A low limit, so that filling it is quick (Go raised the soft limit
	// to the hard one at start).
	lim := syscall.Rlimit{Cur: 256, Max: 256}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var held []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		held = append(held, f)
	}
	fmt.Println("full")
	in := bufio.NewReader(os.Stdin)
	in.ReadString('\n')
	for _, f := range held {
		f.Close()
	}
	io.Copy(io.Discard, in)
	stop()
	os.Exit(0)
}

// TestStatsOutlivesEMFILE: `wgpio stats` is answered again once a
// gateway that ran out of file descriptors has some back. A connection
// that came while none was free failed the stats socket's accept
// (EMFILE), which ended its loop for good: every later `wgpio stats`
// hung until the gateway restarted. The failure is logged once, and the
// waiting client is answered.
func TestStatsOutlivesEMFILE(t *testing.T) {
	testenv.Root(t)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := topo.UniqueName("wgpe")
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), statsEMFILEEnv+"="+name)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	logs := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case logs <- sc.Text():
			default:
			}
		}
		close(logs)
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); line != "full\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	go func() { exited <- cmd.Wait() }()
	c, err := net.Dial("unix", filepath.Join(runDir, name+".stats"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The accept of this connection fails for want of a descriptor.
	deadline := time.After(20 * time.Second)
	for reported := false; !reported; {
		select {
		case l, ok := <-logs:
			if !ok {
				t.Fatal("the child ended")
			}
			reported = strings.Contains(l, "stats socket: accept failed") && strings.Contains(l, "too many open files")
		case <-deadline:
			t.Fatal("no failed accept logged in 20 s")
		}
	}
	if _, err := io.WriteString(stdin, "free\n"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(c)
	if string(b) != "\"ok\"\n" {
		t.Errorf("stats after the descriptors came back: %q, %v; want \"ok\"", b, err)
	}
}
