//go:build linux

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/wgpio/wgpio/config"
)

// loadConfig is config.Load, with what to do about a file this process
// may not read (unreadableHint): up, check, strip and each reload read
// the file through it.
func loadConfig(path string) (*config.File, error) {
	f, err := config.Load(path)
	switch {
	case err != nil && errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("%w%s", err, unreadableHint(path))
	case err != nil && errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w%s", err, missingHint(path))
	}
	return f, err
}

// configDir is where wgpio's configuration files live (dist/wgpio.service
// runs /etc/wgpio/NAME.conf).
const configDir = "/etc/wgpio"

// missingHint names the file that a path that does not exist most likely
// meant, in wg-quick's habit of naming a configuration by its interface
// (wg-quick up wg0 reads /etc/wireguard/wg0.conf): path with ".conf"
// added, or a bare name's file in configDir. "" when neither exists.
// `wgpio up -c wg0` was told only "open wg0: no such file or directory".
func missingHint(path string) string {
	var tries []string
	if !strings.HasSuffix(path, ".conf") {
		tries = append(tries, path+".conf")
	}
	if !strings.ContainsRune(path, '/') {
		tries = append(tries, filepath.Join(configDir, strings.TrimSuffix(path, ".conf")+".conf"))
	}
	for _, t := range tries {
		if st, err := os.Stat(t); err == nil && !st.IsDir() {
			return fmt.Sprintf(" (the file goes by its path: did you mean -c %s?)", t)
		}
	}
	return ""
}

// unreadableHint explains a configuration file at path that the process
// may not open (EACCES): the user it runs as, and the mode and owners
// that let that user's group read it, not every user, as
// dist/wgpio.service's header installs /etc/wgpio and the file (a file
// written under umask 077, as the README makes the key, is root's alone:
// the unit's user wgpio was told only "permission denied"). A directory
// on the way that the user may not enter is named instead.
func unreadableHint(path string) string {
	uid := os.Getuid()
	who, group := "uid "+strconv.Itoa(uid), strconv.Itoa(os.Getgid())
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		who = "user " + u.Username + ", uid " + u.Uid
		group = u.Gid
		if g, err := user.LookupGroupId(u.Gid); err == nil {
			group = g.Name
		}
	}
	if dir := closedDir(path); dir != "" {
		return fmt.Sprintf(" (running as %s, which may not enter the directory %s: let its group in, chgrp %s %s && chmod 0750 %s, as dist/wgpio.service's header installs /etc/wgpio)",
			who, dir, group, shellQuote(dir), shellQuote(dir))
	}
	mode := ""
	if st, err := os.Stat(path); err == nil {
		mode = fmt.Sprintf(", and the file is mode %#o", st.Mode().Perm())
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			mode += fmt.Sprintf(" of %s:%s", userName(sys.Uid), groupName(sys.Gid))
		}
	}
	return fmt.Sprintf(" (running as %s%s: let the group %s read it, not every user, chgrp %s %s && chmod 0640 %s, as dist/wgpio.service's header installs it)",
		who, mode, group, group, shellQuote(path), shellQuote(path))
}

// closedDir returns the first directory on the way to path (absolute, from
// the root down) in which this process may not look up the next name, or
// "" when every one lets it.
func closedDir(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	dir := "/"
	for _, name := range strings.Split(strings.TrimPrefix(filepath.Dir(abs), "/"), "/") {
		if name == "" {
			continue
		}
		next := filepath.Join(dir, name)
		if _, err := os.Lstat(next); errors.Is(err, fs.ErrPermission) {
			return dir
		}
		dir = next
	}
	if _, err := os.Lstat(abs); errors.Is(err, fs.ErrPermission) {
		return dir
	}
	return ""
}

// userName and groupName name a file's owners for a message: the name,
// else the number.
func userName(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return u.Username
	}
	return strconv.FormatUint(uint64(uid), 10)
}

func groupName(gid uint32) string {
	if g, err := user.LookupGroupId(strconv.FormatUint(uint64(gid), 10)); err == nil {
		return g.Name
	}
	return strconv.FormatUint(uint64(gid), 10)
}

// warnWorldAccessible logs a warning when the configuration file at path
// may be read or written by every user (any of the permission bits for
// "other", 0007), as wg-quick(8) warns ("is world accessible"): the file
// holds the gateway's private key. Group access is left alone
// (dist/wgpio.service reads it through the group wgpio, mode 0640). A
// file that cannot be stat'ed is not warned of: reading it has failed or
// will fail with its own error.
func warnWorldAccessible(log *slog.Logger, path string) {
	if perm, ok := worldAccessible(path); ok {
		log.Warn(worldAccessibleText(perm),
			"file", path, "mode", fmt.Sprintf("%#o", perm), "fix", "chmod o-rwx "+shellQuote(path))
	}
}

const worldAccessibleWarning = "the configuration file is world accessible, and it holds the private key"

// worldAccessibleText is the warning for a file of mode perm: writable by
// every user is worse than readable (anyone may add a peer, which the next
// reload applies), and says so.
func worldAccessibleText(perm os.FileMode) string {
	if perm&0o002 != 0 {
		return worldAccessibleWarning + "; it is world writable too: any user may add peers, which the next reload applies"
	}
	return worldAccessibleWarning
}

// worldAccessible reports whether every user may read or write the file
// at path (warnWorldAccessible), with its permission bits; false for a
// file that cannot be stat'ed.
func worldAccessible(path string) (os.FileMode, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	perm := st.Mode().Perm()
	return perm, perm&0o007 != 0
}
