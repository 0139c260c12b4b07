//go:build linux

package main

import (
	"fmt"
	"log/slog"
	"os"
)

// warnWorldAccessible logs a warning when the configuration file at path
// may be read or written by every user (any of the permission bits for
// "other", 0007), as wg-quick(8) warns ("is world accessible"): the file
// holds the gateway's private key. Group access is left alone
// (dist/wgpio.service reads it through the group wgpio, mode 0640). A
// file that cannot be stat'ed is not warned of: reading it has failed or
// will fail with its own error.
func warnWorldAccessible(log *slog.Logger, path string) {
	if perm, ok := worldAccessible(path); ok {
		log.Warn(worldAccessibleWarning,
			"file", path, "mode", fmt.Sprintf("%#o", perm), "fix", "chmod o-rwx "+path)
	}
}

const worldAccessibleWarning = "the configuration file is world accessible, and it holds the private key"

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
