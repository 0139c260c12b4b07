//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/dataplane/afxdp"
)

// The ports turn their interfaces' RX VLAN offload off while they are
// open (afxdp.Config.KeepRXVLANOffload), a setting of the host that a
// process killed before it closes them (SIGKILL, systemd's TimeoutStopSec,
// a crash, a start aborted by a second stop signal) cannot turn back on.
// offloadJournal keeps each such change in a file under runDir, and a
// later `wgpio up` undoes the changes of the processes gone
// (restoreOffloads). runDir is a tmpfs (/run): the records go at reboot,
// with the settings they describe.

// offloadRecord is a record file's content, JSON: the afxdp.OffloadChange
// and who made it.
type offloadRecord struct {
	Gateway string   `json:"gateway"`
	PID     int      `json:"pid"`
	Netns   uint64   `json:"netns"`
	Ifindex int      `json:"ifindex"`
	Name    string   `json:"name"`
	MAC     string   `json:"mac,omitempty"`
	Off     []string `json:"off"`
}

// offloadPath is the record file of the change to the device of index
// ifindex in the network namespace of inode netns.
func offloadPath(dir string, netns uint64, ifindex int) string {
	return filepath.Join(dir, fmt.Sprintf("offload-%d-%d.json", netns, ifindex))
}

// offloadJournal is the afxdp.OffloadJournal of `wgpio up` (gateway
// name): a record file per change (offloadPath), locked (flock) by this
// process as long as it lives, so that a process that finds the lock free
// knows the change was left behind. Safe for concurrent use.
type offloadJournal struct {
	dir, gateway string
	mu           sync.Mutex
	held         map[string]*os.File // the records written, by path, locked; guarded by mu
}

func newOffloadJournal(dir, gateway string) *offloadJournal {
	return &offloadJournal{dir: dir, gateway: gateway, held: make(map[string]*os.File)}
}

// Record writes c's record, locked before it takes its name: whoever
// finds it finds it locked while this process lives.
func (j *offloadJournal) Record(c afxdp.OffloadChange) error {
	rec := offloadRecord{Gateway: j.gateway, PID: os.Getpid(), Netns: c.Netns, Ifindex: c.Ifindex, Name: c.Name, Off: c.Off}
	if len(c.MAC) > 0 {
		rec.MAC = c.MAC.String()
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(j.dir, ".offload-*.tmp")
	if err != nil {
		return err
	}
	path := offloadPath(j.dir, c.Netns, c.Ifindex)
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
	if err == nil {
		_, err = f.Write(append(b, '\n'))
	}
	if err == nil {
		err = f.Chmod(0o644) // as the lock files: readable by a wgpio of another user
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.held[path] = f
	return nil
}

// Forget removes c's record, still locked, and lets it go.
func (j *offloadJournal) Forget(c afxdp.OffloadChange) {
	path := offloadPath(j.dir, c.Netns, c.Ifindex)
	j.mu.Lock()
	f := j.held[path]
	delete(j.held, path)
	j.mu.Unlock()
	if f != nil {
		os.Remove(path)
		f.Close()
	}
}

// restoreOffloads undoes the changes recorded under dir by wgpio
// processes gone without undoing them, in this network namespace, before
// the gateway starts: records whose lock is free. A change to an
// interface this process has locked (ours, by lockInstance) or that no
// running wgpio has locked is undone (afxdp.RestoreOffload: on the same
// device only) and its record removed, and each is logged once; a
// change of another network namespace is left to a wgpio started there.
func restoreOffloads(log *slog.Logger, dir string, ours []string) {
	paths, err := filepath.Glob(filepath.Join(dir, "offload-*.json"))
	if err != nil {
		return
	}
	for _, path := range paths {
		restoreOffload(log, dir, path, ours)
	}
}

// restoreOffload is restoreOffloads for the record at path.
func restoreOffload(log *slog.Logger, dir, path string, ours []string) {
	f, err := os.Open(path)
	if err != nil {
		return // its owner removed it
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return // its owner runs
	}
	fi, err := f.Stat()
	if err != nil {
		return
	}
	if now, err := os.Stat(path); err != nil || !os.SameFile(fi, now) {
		return // removed by its owner before we had the lock
	}
	var rec offloadRecord
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil {
		log.Warn("removing a record of RX VLAN offload left by a wgpio gone that cannot be read", "record", path, "err", err)
		os.Remove(path)
		return
	}
	if strconv.FormatUint(rec.Netns, 10) != netnsID() {
		log.Debug("a record of RX VLAN offload of another network namespace: left to a wgpio started there", "record", path)
		return
	}
	if !slices.Contains(ours, rec.Name) {
		// No running wgpio may use the interface meanwhile: its lock,
		// as lockInstance takes it.
		lpath := filepath.Join(dir, "if-"+netnsID()+"-"+rec.Name+".lock")
		l, held, err := takeLock(lpath)
		if err != nil {
			log.Warn("a record of RX VLAN offload left by a wgpio gone: its interface's lock cannot be taken, record left", "record", path, "lock", lpath, "err", err)
			return
		}
		if !held {
			l.Close()
			log.Debug("a record of RX VLAN offload on an interface a running wgpio has: left", "record", path, "interface", rec.Name)
			return
		}
		defer func() { os.Remove(lpath); l.Close() }()
	}
	c := afxdp.OffloadChange{Netns: rec.Netns, Ifindex: rec.Ifindex, Name: rec.Name, Off: rec.Off}
	c.MAC, _ = net.ParseMAC(rec.MAC)
	attrs := []any{"interface", rec.Name, "ifindex", rec.Ifindex, "features", strings.Join(rec.Off, ","), "pid", rec.PID, "gateway", rec.Gateway}
	err = afxdp.RestoreOffload(c)
	switch {
	case err == nil:
		log.Warn("turned RX VLAN offload back on: the wgpio that turned it off ended without its clean stop (SIGKILL, systemd's TimeoutStopSec, a crash, or a start aborted)", attrs...)
	case errors.Is(err, fs.ErrPermission):
		log.Warn("could not turn RX VLAN offload back on, left off by a wgpio that ended without its clean stop: record kept for a start with CAP_NET_ADMIN", append(attrs, "err", err)...)
		return
	case errors.Is(err, afxdp.ErrNoSuchInterface):
		log.Info("the interface whose RX VLAN offload a wgpio gone left off is gone too: nothing to restore", append(attrs, "err", err)...)
	default:
		log.Warn("could not turn RX VLAN offload back on, left off by a wgpio that ended without its clean stop", append(attrs, "err", err)...)
	}
	os.Remove(path)
}
