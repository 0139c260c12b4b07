//go:build linux

package gwproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
		ok         bool
	}{
		// proc(5): pid (comm) state ppid pgrp session tty_nr tpgid flags
		// minflt cminflt majflt cmajflt utime stime ...
		{"plain", "42 (wggw) S 1 42 42 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 5 0", 2 * time.Second, true},
		{"spaces and parens in comm", "42 (a) b (c) R 1 42 42 0 -1 0 0 0 0 0 7 3 0 0", 100 * time.Millisecond, true},
		{"no comm", "42 wggw S 1", 0, false},
		{"short", "42 (x) S 1 2 3", 0, false},
		{"not a number", "42 (x) S 1 42 42 0 -1 0 0 0 0 0 x 3 0 0", 0, false},
	} {
		got, err := ParseStatCPU(tc.stat)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParseStatCPU(%s) = %v, %v; want %v, ok %v", tc.name, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseStatusSwitches(t *testing.T) {
	status := "Name:\twggw\nThreads:\t5\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n"
	if got := ParseStatusSwitches(status); got != 127 {
		t.Errorf("ParseStatusSwitches = %d, want 127", got)
	}
	if got := ParseStatusSwitches("Name:\tx\n"); got != 0 {
		t.Errorf("ParseStatusSwitches(no switches) = %d, want 0", got)
	}
}

// TestStartStop runs a process that spins, reads its usage and stops it.
func TestStartStop(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	p, err := Start("spin", exec.Command(sh, "-c", "echo ready; while :; do :; done"), filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if err := p.WaitLog("ready", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The kernel counts CPU time in ticks (10 ms): wait for the first
	// one the spinning process is charged, however long a loaded machine
	// keeps it off a CPU (the bound only ends a test of a broken Usage).
	var u Usage
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		u, err = p.Usage()
		if err != nil || (u.CPU > 0 && u.Threads >= 1) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || u.CPU <= 0 || u.Threads < 1 {
		t.Errorf("Usage() = %+v, %v; want CPU > 0 and a thread", u, err)
	}
	p.Stop()
	if done, _ := p.Exited(); !done {
		t.Errorf("Exited() after Stop = false, want true")
	}
	if _, err := os.Stat("/proc/" + itoa(p.Pid()) + "/stat"); err == nil {
		t.Errorf("process %d still exists after Stop", p.Pid())
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
