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
	st, err := os.Stat(path)
	if err != nil {
		return
	}
	if perm := st.Mode().Perm(); perm&0o007 != 0 {
		log.Warn("the configuration file is world accessible, and it holds the private key",
			"file", path, "mode", fmt.Sprintf("%#o", perm), "fix", "chmod o-rwx "+path)
	}
}
