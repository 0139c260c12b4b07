//go:build linux

package uapiserve

import (
	"net"
	"path/filepath"
	"testing"
)

// TestListening: listening tells a socket file something in this network
// namespace listens on from one left by a process that ended (removeStale
// removes another user's socket only when nothing listens on it).
func TestListening(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	if !listening(path) {
		t.Errorf("listening(%s) = false while a socket listens on it", path)
	}
	l.Close()
	if listening(path) {
		t.Errorf("listening(%s) = true after its listener closed", path)
	}
	if listening(path + "y") {
		t.Errorf("listening of a path no socket has = true")
	}
}
