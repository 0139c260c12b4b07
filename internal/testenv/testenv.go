// Package testenv holds the one rule for tests that need something the
// machine may lack (root, a kernel feature, a tool): skip with the reason and
// the fix, or, when WGPIO_REQUIRE_ALL=1 (as in CI), fail instead, so that a
// run cannot pass by skipping.
//
// The helpers on network namespaces (Topology, NS, Veth, StartCapture,
// SendUDP, SendFrames, FillTUN, ...) are Linux only; the rest (Missing,
// Root, Tool, Short, PollUntil, WANLeaks, LogBuffer, MainOrTests) build
// everywhere, for the tests of the portable packages.
package testenv

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// RequireAllEnv is the environment variable that turns skips into failures.
const RequireAllEnv = "WGPIO_REQUIRE_ALL"

// RequireAll reports whether skips are failures in this run.
func RequireAll() bool { return os.Getenv(RequireAllEnv) == "1" }

// Missing skips t with "missing <what>: <fix>", or fails it under
// WGPIO_REQUIRE_ALL=1.
func Missing(t testing.TB, what, fix string) {
	t.Helper()
	if RequireAll() {
		t.Fatalf("missing %s (%s=1 forbids skipping): %s", what, RequireAllEnv, fix)
	}
	t.Skipf("missing %s: %s", what, fix)
}

// Root requires effective UID 0 (for namespaces, veth, XDP and AF_XDP).
func Root(t testing.TB) {
	t.Helper()
	if unix.Geteuid() != 0 {
		Missing(t, "root", "run the tests as root (sudo -E go test ./...), they create network namespaces")
	}
}

// Tool requires an executable on PATH and returns its path. pkg names the
// Debian package that provides it.
func Tool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "tool "+name, "apt-get install "+pkg)
	}
	return p
}

// Short skips a long test under -short. It is not subject to
// WGPIO_REQUIRE_ALL: -short is the caller's explicit choice.
func Short(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipped in -short mode: %s", why)
	}
}
