//go:build linux

package main

// The locks of `wgpio up`: one gateway per name and per interface, under
// runDir, and the stale files of instances that ended without removing
// them.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockInstance makes sure one gateway runs per name and per interface of
// ifaces (WAN and LAN, or none), so that a second instance on either is
// refused by name at once rather than by the kernel when it attaches XDP or
// binds a queue. Interfaces are those of this network namespace: the lock
// names the namespace's inode. "" in ifaces is skipped.
func lockInstance(name string, ifaces []string) (func(), error) {
	// Another user than root needs the run directories made writable for
	// it (dist/wgpio.service: RuntimeDirectory=wgpio wireguard).
	hint := func(err error) string {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Sprintf(" (running as uid %d: make %s and /var/run/wireguard writable for that user, as dist/wgpio.service does with RuntimeDirectory=)", os.Getuid(), runDir)
		}
		return ""
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w%s", runDir, err, hint(err))
	}
	var files []*os.File
	release := func() {
		// Remove the files we hold while holding them, so that they do
		// not pile up; a waiting instance then locks a fresh file.
		for _, f := range files {
			os.Remove(f.Name())
			f.Close()
		}
	}
	type lock struct{ path, what string }
	locks := []lock{{filepath.Join(runDir, "name-"+name+".lock"), "name " + name}}
	for i, dev := range ifaces {
		// One file locked twice by one process would conflict with itself.
		if dev != "" && !slices.Contains(ifaces[:i], dev) {
			locks = append(locks, lock{filepath.Join(runDir, "if-"+netnsID()+"-"+dev+".lock"), "interface " + dev})
		}
	}
	for _, l := range locks {
		f, held, err := takeLock(l.path)
		if err != nil {
			release()
			return nil, fmt.Errorf("lock %s: %w%s", l.path, err, hint(err))
		}
		if !held {
			holder := lockHolder(f)
			f.Close() // not ours: leave the file to its holder
			release()
			return nil, fmt.Errorf("another wgpio%s already runs with %s (lock %s held)", holder, l.what, l.path)
		}
		files = append(files, f)
		// Who holds it, for the message of an instance refused.
		if f.Truncate(0) == nil {
			f.WriteAt([]byte(fmt.Sprintf("%s %d\n", name, os.Getpid())), 0)
		}
	}
	return release, nil
}

// takeLock opens the lock file at path (openLock) and locks it without
// waiting: held reports whether this process holds it now (else f is the
// file another holds, for lockHolder). A file locked after its holder
// removed it from path (a holder removes its files while it holds them,
// at its end) is no lock any more: the path is opened again, so that two
// processes never both hold a file of one path.
func takeLock(path string) (f *os.File, held bool, err error) {
	for range 10 {
		if f, err = openLockFile(path); err != nil {
			return nil, false, err
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			return f, false, nil
		}
		var open, named unix.Stat_t
		if unix.Fstat(int(f.Fd()), &open) == nil && unix.Stat(path, &named) == nil && open.Ino == named.Ino && open.Dev == named.Dev {
			return f, true, nil
		}
		f.Close()
	}
	return nil, false, fmt.Errorf("the file kept being replaced while it was locked")
}

// openLockFile is openLock, replaced by a test.
var openLockFile = openLock

// openLock opens (creating it) the lock file at path for lockInstance. A
// file this user may not write, left by an instance of another user (a
// root `wgpio up` killed before it removed it, under a run directory the
// service user owns), is opened read-only: held, the caller's lock fails
// and names its holder; free, it is stale, and is replaced while this
// process holds it (the directory is this user's to write: a start as the
// service user failed on it, every RestartSec, naming the directory).
func openLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if !errors.Is(err, fs.ErrPermission) {
		return f, err
	}
	old, oerr := os.Open(path)
	if oerr != nil {
		return nil, err
	}
	if unix.Flock(int(old.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return old, nil
	}
	defer old.Close()
	if os.Remove(path) != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
}

// lockHolder reads who holds the lock file f, as lockInstance writes it
// ("NAME PID"), and returns " (gateway NAME, pid PID)", or "" when the
// file says nothing usable (a holder still writing it).
func lockHolder(f *os.File) string {
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, 0)
	fields := strings.Fields(string(b[:n]))
	if len(fields) != 2 || checkGatewayName(fields[0]) != nil {
		return ""
	}
	if _, err := strconv.Atoi(fields[1]); err != nil {
		return ""
	}
	return fmt.Sprintf(" (gateway %s, pid %s)", fields[0], fields[1])
}

// netnsID names this process's network namespace by its inode.
func netnsID() string {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return "0"
	}
	return strconv.FormatUint(st.Ino, 10)
}
