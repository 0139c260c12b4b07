//go:build linux

package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestDemoEndsCleanOnHangupAndPipe: the demo removes what it made when
// its terminal closes (SIGHUP) and when the reader of its output goes
// away (`wgpio demo | head`, or quitting less: the next line written
// raises SIGPIPE). Both killed it with its namespaces left behind.
func TestDemoEndsCleanOnHangupAndPipe(t *testing.T) {
	testenv.Root(t)
	goBin := testenv.Tool(t, "go", "golang (or the toolchain from go.dev/dl)")
	bin := filepath.Join(t.TempDir(), "wgpio")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	nsRE := regexp.MustCompile(`\bwgd[gh][ab][0-9a-f]+\b`)
	for _, tc := range []struct {
		name string
		// early: the signal comes once the namespaces are named, before
		// the first handshake (stopped there, it said "no traffic came
		// through" and exited 1).
		early bool
		end   func(t *testing.T, cmd *exec.Cmd, r *os.File)
	}{
		{"SIGINT before the handshake", true, func(t *testing.T, cmd *exec.Cmd, r *os.File) {
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, r)
		}},
		{"SIGHUP", false, func(t *testing.T, cmd *exec.Cmd, r *os.File) {
			if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			r.Close()
		}},
		{"SIGPIPE", false, func(t *testing.T, cmd *exec.Cmd, r *os.File) {
			r.Close() // its next line of counters, within a second, meets a closed pipe
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "demo", "-rate", "1000")
			cmd.Stdout, cmd.Stderr = w, w
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			exited := make(chan struct{})
			var waitErr error
			go func() { waitErr = cmd.Wait(); close(exited) }()
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
			})
			// Read up to the traffic's start, noting the namespaces it names.
			names := map[string]bool{}
			sc := bufio.NewScanner(r)
			started := false
			for sc.Scan() {
				for _, ns := range nsRE.FindAllString(sc.Text(), -1) {
					names[ns] = true
				}
				if tc.early && len(names) >= 3 || strings.Contains(sc.Text(), "starting the traffic") {
					started = true
					break
				}
			}
			if !started || len(names) < 3 {
				t.Fatalf("the demo did not start its traffic, naming its namespaces (got %v)", names)
			}
			tc.end(t, cmd, r)
			select {
			case <-exited:
			case <-time.After(2 * time.Minute):
				t.Fatal("the demo still runs 2 minutes after the signal")
			}
			// A stop by signal is a normal end: exit status 0.
			if waitErr != nil {
				t.Errorf("the demo ended on %s with %v, want exit status 0", tc.name, waitErr)
			}
			for ns := range names {
				if _, err := os.Stat("/run/netns/" + ns); !os.IsNotExist(err) {
					t.Errorf("namespace %s still there after the demo ended on %s (stat: %v)", ns, tc.name, err)
				}
			}
		})
	}
}

// TestDemoOutlivesCaptureClient: a `wgpio capture NAME -c N` on the
// demo's gateway, which hangs up after N frames, leaves the demo running.
// The demo asked for SIGPIPE to learn that its output's reader went
// away; with that, Go delivers SIGPIPE for a write to any broken socket,
// and the capture server's next frame to the departed client ended the
// demo after a few seconds, with its -duration far from over.
func TestDemoOutlivesCaptureClient(t *testing.T) {
	testenv.Root(t)
	goBin := testenv.Tool(t, "go", "golang (or the toolchain from go.dev/dl)")
	bin := filepath.Join(t.TempDir(), "wgpio")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "demo", "-rate", "5000")
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
			<-exited
		}
	})
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	nameRE := regexp.MustCompile(`wgpio gateway (\S+) in `)
	counterLine := regexp.MustCompile(`^\s*[0-9]+s\s`)
	var name string
	for started := false; !started; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the demo ended before its traffic started (name %q)", name)
			}
			if m := nameRE.FindStringSubmatch(l); m != nil {
				name = m[1]
			}
			started = strings.Contains(l, "starting the traffic")
		case <-time.After(2 * time.Minute):
			t.Fatal("the demo did not start its traffic in 2 minutes")
		}
	}
	if name == "" {
		t.Fatal("the demo did not name its wgpio gateway")
	}
	pcap := filepath.Join(t.TempDir(), "c.pcapng")
	if out, err := exec.Command(bin, "capture", name, "-c", "2", "-w", pcap).CombinedOutput(); err != nil {
		t.Fatalf("wgpio capture %s -c 2: %v\n%s", name, err, out)
	}
	// Counters come once a second: five more lines, and the demo still
	// running, show that the capture's end did not end it.
	deadline := time.After(20 * time.Second)
	for n := 0; n < 5; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the demo ended after a capture client hung up (%d lines of counters after it)", n)
			}
			if strings.Contains(l, "where the datagrams went") {
				t.Fatalf("the demo stopped after a capture client hung up: %q", l)
			}
			if counterLine.MatchString(l) {
				n++
			}
		case <-deadline:
			t.Fatalf("no counters from the demo 20 s after a capture client hung up (%d lines)", n)
		}
	}
}
