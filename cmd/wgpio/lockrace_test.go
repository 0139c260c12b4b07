//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTakeLockReplaced: a lock file whose holder removed it from its path
// between another process's open and its lock (a holder removes its files
// at its end, while it holds them) is no lock: takeLock opens the path
// again and holds the file there. Before, the second process held the
// removed file, and a third, opening the path anew, took the same name or
// interface beside it.
func TestTakeLockReplaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "name-x.lock")
	opens := 0
	openLockFile = func(p string) (*os.File, error) {
		opens++
		f, err := openLock(p)
		if err == nil && opens == 1 {
			os.Remove(p) // the holder's end, after this open
		}
		return f, err
	}
	t.Cleanup(func() { openLockFile = openLock })
	f, held, err := takeLock(path)
	if err != nil || !held {
		t.Fatalf("takeLock = %v, %v; want held", held, err)
	}
	defer f.Close()
	var open, named unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &open); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(path, &named); err != nil || open.Ino != named.Ino {
		t.Errorf("the file held is not the one at %s (%v), after %d opens", path, err, opens)
	}
	if opens != 2 {
		t.Errorf("%d opens, want 2 (the removed file left)", opens)
	}
}
