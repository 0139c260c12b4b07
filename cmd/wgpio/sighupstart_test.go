//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReloadSignalWhileReading: a SIGHUP that comes while `wgpio up` still
// reads its file (here a FIFO nothing writes yet: a large file, a slow
// disk) does not end the process, as Go's default would: a unit of
// Type=simple lets `systemctl reload` send one as soon as the process
// exists, and a gateway ended by SIGHUP is not restarted. The start goes
// on (and here fails on its interfaces, with their error).
func TestReloadSignalWhileReading(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "wgt0.conf")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(wgpioBin, "up", "-c", fifo, "-wan", "nosuchwan0", "-lan", "nosuchlan0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-done
	}()
	// Wait until a thread of the child blocks opening the FIFO.
	for deadline := time.Now().Add(10 * time.Second); !openingFIFO(cmd.Process.Pid); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the child never blocked opening its configuration FIFO")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // delivered, and acted on by the default
	// Non-blocking: with no reader left (the child ended), ENXIO at once.
	w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		err := <-done
		done <- err
		t.Fatalf("the child no longer reads its file: it ended (%v) at the SIGHUP; stderr:\n%s", err, stderr.String())
	}
	w.WriteString("[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\nListenPort = 51820\n")
	w.Close()
	select {
	case err := <-done:
		done <- err // for the deferred wait
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("up returned %v, want its start's failure (exit 1)", err)
		}
		if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
			t.Fatalf("up was ended by %v while it read its file; stderr:\n%s", ws.Signal(), stderr.String())
		}
		if !strings.Contains(stderr.String(), "nosuch") {
			t.Errorf("up exited with %v without naming the missing interfaces:\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("up did not end")
	}
}

// openingFIFO reports whether a thread of process pid waits for a FIFO's
// other end (wchan wait_for_partner, fs/pipe.c).
func openingFIFO(pid int) bool {
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "wchan"))
	for _, p := range tasks {
		if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == "wait_for_partner" {
			return true
		}
	}
	return false
}
