//go:build linux

package afxdp

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDiagnoseFileLimits: a socket that the process's or the system's
// open-file limit refuses (EMFILE, ENFILE) says which limit and how to
// raise it, and still wraps the errno. Before, a start with `ulimit -n 64`
// said "create AF_XDP socket: socket: too many open files" and nothing of
// RLIMIT_NOFILE or LimitNOFILE=.
func TestDiagnoseFileLimits(t *testing.T) {
	for errno, want := range map[unix.Errno][]string{
		unix.EMFILE: {"RLIMIT_NOFILE now ", "LimitNOFILE="},
		unix.ENFILE: {"fs.file-max"},
	} {
		err := diagnose(fmt.Errorf("create AF_XDP socket: %w", os.NewSyscallError("socket", errno)))
		if !errors.Is(err, errno) {
			t.Errorf("%v: diagnosed error %v does not wrap the errno", errno, err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q lacks %q", errno, err, w)
			}
		}
	}
}
