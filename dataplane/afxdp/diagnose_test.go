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

// TestDiagnoseMemlock: a UMEM the kernel would not lock (ENOMEM) is a
// *MemlockError that is ErrMemlock and wraps the errno, saying the limit
// and, in afxdp's terms, the fixes; Smaller says the last in a caller's.
func TestDiagnoseMemlock(t *testing.T) {
	err := diagnose(fmt.Errorf("register UMEM of 1024 bytes: %w", os.NewSyscallError("setsockopt XDP_UMEM_REG", unix.ENOMEM)))
	var me *MemlockError
	if !errors.As(err, &me) || !errors.Is(err, ErrMemlock) || !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("ENOMEM: %v (%T), want a *MemlockError, ErrMemlock and the errno", err, err)
	}
	for _, want := range []string{"afxdp: RLIMIT_MEMLOCK too low (now ", "LimitMEMLOCK=infinity", "or use fewer frames, Config.NumFrames): register UMEM"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	me.Smaller = "run fewer queues"
	if got := me.Error(); !strings.Contains(got, "grant CAP_IPC_LOCK, or run fewer queues): register UMEM") || strings.Contains(got, "NumFrames") {
		t.Errorf("with Smaller: %q, want the caller's words instead of NumFrames", got)
	}
}
