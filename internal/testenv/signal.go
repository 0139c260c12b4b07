package testenv

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// MainEnv, set to 1, makes an example's TestMain run its main instead of
// its tests (see StopWithSignal).
const MainEnv = "WGPIO_EXAMPLE_MAIN"

// MainOrTests is an example's TestMain: it runs main, then exits 0, when
// MainEnv is set (StopWithSignal runs the test binary so), else the
// tests.
func MainOrTests(m *testing.M, main func()) {
	if os.Getenv(MainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// StopWithSignal runs cmd (the test binary itself, whose TestMain runs
// main when MainEnv is set: StopWithSignal sets it) until ready, given its
// output so far, returns true, sends it sig, and returns its whole output
// once it exited, and whether it exited 0. It fails the test if cmd does
// not start, get ready or exit within 20 s each (killing it then).
func StopWithSignal(t *testing.T, cmd *exec.Cmd, ready func(out string) bool, sig os.Signal) (out string, ok bool) {
	t.Helper()
	cmd.Env = append(os.Environ(), MainEnv+"=1")
	var buf LogBuffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if !PollUntil(20*time.Second, func() bool { return ready(buf.String()) }) {
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not get ready:\n%s", cmd.Path, buf.String())
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		return buf.String(), err == nil
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not exit on %v:\n%s", cmd.Path, sig, buf.String())
	}
	return "", false
}
