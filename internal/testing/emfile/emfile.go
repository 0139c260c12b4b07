// Package emfile runs a test's server in a child process that has used up
// its file descriptors (EMFILE), to check that a socket's accept loop
// survives the failed accepts and serves once descriptors are free again.
// The child is the test binary itself, started with an environment
// variable that its TestMain looks for.
package emfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Fill is the child's part, called by TestMain once the server runs:
// it lowers the descriptor limit to 256 (Go raised the soft limit to the
// hard one at start) and opens /dev/null until no descriptor is left,
// says "full" on stdout, frees them all on a line on stdin and returns
// when stdin ends. The server's log goes to stderr, which Child.Logs
// reads. It exits with status 2 when the limit cannot be set.
func Fill() {
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
}

// Child is a running child process of Start.
type Child struct {
	stdin io.WriteCloser
	logs  chan string
}

// Start runs the test binary as a child with env=value in its
// environment (its TestMain then serves and calls Fill) and returns once
// the child said it is full. The test's cleanup closes the child's stdin
// and waits up to 10 s for it to exit with status 0 (then kills it and
// fails the test).
func Start(t *testing.T, env, value string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), env+"="+value)
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
	c := &Child{stdin: stdin, logs: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case c.logs <- sc.Text():
			default:
			}
		}
		close(c.logs)
	}()
	exited := make(chan error, 1)
	t.Cleanup(func() {
		stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("child: %v", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Error("the child did not exit 10 s after its stdin closed")
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	go func() { exited <- cmd.Wait() }()
	if line != "full\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	return c
}

// WaitLog waits up to timeout for a line of the child's log that holds
// every one of parts, and fails the test without one.
func (c *Child) WaitLog(t *testing.T, timeout time.Duration, parts ...string) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-c.logs:
			if !ok {
				t.Fatal("the child ended")
			}
			found := true
			for _, p := range parts {
				found = found && strings.Contains(l, p)
			}
			if found {
				return
			}
		case <-deadline:
			t.Fatalf("no log line with %q in %v", parts, timeout)
		}
	}
}

// Free makes the child free its descriptors.
func (c *Child) Free(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, "free\n"); err != nil {
		t.Fatal(err)
	}
}
