//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUpOutlivesLogReader: `wgpio up ... 2>&1 | head -1`, or a tee whose
// reader died: the gateway's next log line (here a reload's) meets a
// closed pipe, and the gateway runs on, answering `wgpio stats` (which
// counts the line lost), and ends cleanly on SIGTERM. Go's default for SIGPIPE on fd 1 or 2 killed it,
// with its users' traffic.
func TestUpOutlivesLogReader(t *testing.T) {
	s := newSite(t, nil)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := s.GwA.Command(wgpioBin, "up", "-c", s.conf)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	read := make(chan struct{})
	go func() { io.Copy(io.Discard, r); close(read) }()
	statsPath := filepath.Join(runDir, s.GwName+".stats")
	waitFor(t, 20*time.Second, "the gateway's stats socket", func() bool {
		_, err := os.Stat(statsPath)
		return err == nil
	})
	r.Close() // the reader goes away
	<-read
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The reload logs a line, into the broken pipe, at once.
	select {
	case err := <-done:
		done <- err
		t.Fatalf("the gateway ended (%v) at its first log line after its log's reader went away", err)
	case <-time.After(2 * time.Second):
	}
	if out, err := exec.Command(wgpioBin, "stats", s.GwName).CombinedOutput(); err != nil {
		t.Errorf("wgpio stats %s after the log's reader went away: %v\n%s", s.GwName, err, out)
	} else if !strings.Contains(string(out), "log: ") {
		t.Errorf("wgpio stats %s after a log line into the broken pipe: no \"log: N lines lost\" line\n%s", s.GwName, out)
	}
	out, err := exec.Command(wgpioBin, "stats", "-json", s.GwName).Output()
	var st GatewayStats
	if err == nil {
		err = json.Unmarshal(out, &st)
	}
	if err != nil || st.LogLinesLost == 0 {
		t.Errorf("wgpio stats -json %s after a log line into the broken pipe: log_lines_lost %d (%v), want 1 or more", s.GwName, st.LogLinesLost, err)
	}
	s.pingBoth(t)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Errorf("exit after SIGTERM with its log's reader gone: %v, want status 0", err)
		} else if err != nil {
			t.Error(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway did not end 20 s after SIGTERM")
	}
}
