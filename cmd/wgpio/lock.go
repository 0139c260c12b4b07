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

	"github.com/wgpio/wgpio/config"
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
	// fix says what to do about a lock another gateway holds, besides
	// stopping it: start this one on what that one leaves free (the
	// name comes from -name, else from the file's name).
	type lock struct{ path, what, fix string }
	locks := []lock{{nameLockPath(name), "name " + name,
		"start this one under another name with -name (by default the file's name without .conf)"}}
	for i, dev := range ifaces {
		// One file locked twice by one process would conflict with itself.
		if dev != "" && !slices.Contains(ifaces[:i], dev) {
			locks = append(locks, lock{ifaceLockPath(dev), "interface " + dev, "name another interface"})
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
			stop := "stop that gateway first"
			if gw, pid := lockOwner(f); pid != "" {
				stop += fmt.Sprintf(" (kill -TERM %s; systemctl stop wgpio@%s if it runs under dist/wgpio.service)", pid, gw)
			}
			f.Close() // not ours: leave the file to its holder
			release()
			return nil, fmt.Errorf("another wgpio%s already runs with %s (lock %s held); %s, or %s", holder, l.what, l.path, stop, l.fix)
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

// nameLockPath is the file lockInstance locks for the gateway name: one
// for all network namespaces, as the UAPI socket of that name is
// (/var/run/wireguard is shared by them all).
func nameLockPath(name string) string {
	return filepath.Join(runDir, "name-"+name+".lock")
}

// ifaceLockPath is the file lockInstance locks for interface dev of this
// network namespace.
func ifaceLockPath(dev string) string {
	return filepath.Join(runDir, "if-"+netnsID()+"-"+dev+".lock")
}

// lockHolder reads who holds the lock file f, as lockInstance writes it
// ("NAME PID"), and returns " (gateway NAME, pid PID)", or "" when the
// file says nothing usable (a holder still writing it).
func lockHolder(f *os.File) string {
	name, pid := lockOwner(f)
	if name == "" {
		return ""
	}
	return fmt.Sprintf(" (gateway %s, pid %s)", name, pid)
}

// lockOwner is the gateway name and pid lockInstance wrote to the lock
// file f, "" and "" when it says nothing usable.
func lockOwner(f *os.File) (name, pid string) {
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, 0)
	fields := strings.Fields(string(b[:n]))
	if len(fields) != 2 || checkGatewayName(fields[0]) != nil {
		return "", ""
	}
	if _, err := strconv.Atoi(fields[1]); err != nil {
		return "", ""
	}
	return fields[0], fields[1]
}

// checkInterfaceLocks is `wgpio check -system`'s look at the locks `wgpio
// up` takes for w's WAN and LAN (lockInstance: their trunks, as up takes
// them): one another gateway holds is an error at the interface's key,
// naming that gateway and its pid, since up refuses to start on it ("another
// wgpio ... already runs with interface IF"), where check -system said ok;
// one a gateway of name holds is a warning, as of its UAPI socket
// (heldWarnings): that may be this gateway, already up. A lock is only
// probed (lockHeld), never kept: it is not taken from a gateway starting.
func checkInterfaceLocks(f *config.File, w config.WGPIO, name string) (warnings []string, err error) {
	if w.Mode != config.ModeFastPath && w.Mode != config.ModeCompat {
		return nil, nil // compat-mqtun takes no interface
	}
	for _, x := range []struct{ key, flag, dev string }{{"WAN", "wan", trunkOf(w.WAN)}, {"LAN", "lan", trunkOf(w.LAN)}} {
		path := ifaceLockPath(x.dev)
		held, holder, pid := lockHeld(path)
		if !held {
			continue
		}
		by := ""
		if holder != "" {
			by = fmt.Sprintf(" (gateway %s, pid %s)", holder, pid)
		}
		msg := fmt.Sprintf("another wgpio%s already runs with interface %s (lock %s held): wgpio up refuses to start on it", by, x.dev, path)
		if holder == name {
			warnings = append(warnings, forCheck(keyError(f.Name, w.Lines, x.key, x.flag, msg)).Error()+", unless that is this gateway, already up")
			continue
		}
		return nil, keyError(f.Name, w.Lines, x.key, x.flag, msg+"; stop that gateway first, or name another interface")
	}
	return warnings, nil
}

// lockHeld reports whether a process holds the lock file at path
// (lockInstance's), and the gateway name and pid it wrote there ("" when
// it says nothing usable). The lock is looked up in /proc/locks (its
// FLOCK entries, by device and inode, as Linux prints them: "MAJ:MIN:INO",
// the numbers of the device in hex, fs/locks.c) rather than tried, since
// trying it would refuse a start that tried it in that instant. A file
// that is not there, or that cannot be read, is not held: up says what it
// cannot open; so is one whose holder's pid this process's pid namespace
// does not see, which Linux leaves out of /proc/locks.
func lockHeld(path string) (held bool, name, pid string) {
	f, err := os.Open(path)
	if err != nil {
		return false, "", ""
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return false, "", ""
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false, "", ""
	}
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	for _, l := range strings.Split(string(locks), "\n") {
		// "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF"; a waiter's
		// line has "->" before FLOCK.
		if fields := strings.Fields(l); len(fields) >= 6 && fields[1] == "FLOCK" && fields[5] == id {
			name, pid = lockOwner(f)
			return true, name, pid
		}
	}
	return false, "", ""
}

// netnsID names this process's network namespace by its inode.
func netnsID() string {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return "0"
	}
	return strconv.FormatUint(st.Ino, 10)
}
