//go:build linux

package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestWarnWorldAccessible: `wgpio up` warns, as wg-quick does, of a
// configuration file that every user may read (it holds the private key),
// with the fix; not of one only its owner and group may read (the mode
// dist/wgpio.service asks for). It said nothing of a 0644 file.
func TestWarnWorldAccessible(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		mode os.FileMode
		warn bool
	}{{0o644, true}, {0o604, true}, {0o602, true}, {0o640, false}, {0o600, false}} {
		path := filepath.Join(dir, "wg0.conf")
		if err := os.WriteFile(path, []byte("[Interface]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tt.mode); err != nil {
			t.Fatal(err)
		}
		var logs testenv.LogBuffer
		warnWorldAccessible(slog.New(slog.NewTextHandler(&logs, nil)), path)
		got := logs.String()
		if !tt.warn {
			if got != "" {
				t.Errorf("mode %#o: logged %q, want nothing", tt.mode, got)
			}
			continue
		}
		for _, want := range []string{"world accessible", "private key", "file=" + path, "fix=\"chmod o-rwx " + path + "\""} {
			if !strings.Contains(got, want) {
				t.Errorf("mode %#o: logged %q, want it to contain %q", tt.mode, got, want)
			}
		}
	}
	// A file that is not there: nothing (config.Load reports it).
	var logs testenv.LogBuffer
	warnWorldAccessible(slog.New(slog.NewTextHandler(&logs, nil)), filepath.Join(dir, "missing.conf"))
	if logs.String() != "" {
		t.Errorf("missing file: logged %q, want nothing", logs.String())
	}
}

// TestLockNamesHolder: a second instance refused for a name or an
// interface is told which gateway holds it, and its pid (to stop or
// reload it); it was told only the lock file's path.
func TestLockNamesHolder(t *testing.T) {
	testenv.Root(t)
	first, iface := topo.UniqueName("wgpl"), topo.UniqueName("wgpi")
	release, err := lockInstance(first, []string{iface})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	holder := fmt.Sprintf("another wgpio (gateway %s, pid %d) already runs with ", first, os.Getpid())
	if _, err := lockInstance(first, nil); err == nil || !strings.HasPrefix(err.Error(), holder+"name "+first) {
		t.Errorf("second lock of name %s: %v, want %q…", first, err, holder+"name "+first)
	}
	if _, err := lockInstance(topo.UniqueName("wgpl"), []string{iface}); err == nil || !strings.HasPrefix(err.Error(), holder+"interface "+iface) {
		t.Errorf("second lock of interface %s: %v, want %q…", iface, err, holder+"interface "+iface)
	}
}
