package uapiserve

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SocketDir is where the UAPI sockets are, as wg(8) looks for them
// (wireguard-tools' ipc-uapi-unix.h: SOCK_PATH).
const SocketDir = "/var/run/wireguard"

// Listen opens the UAPI socket of the interface name,
// SocketDir/<name>.sock, and returns its listener: a Unix socket listener
// whose Accept returns every failure as it comes (serve it with an
// acceptloop.Server, NewServer, which tries a failed accept again) and
// whose Close closes the socket and removes its file. As wireguard-go does,
// it makes SocketDir (mode 0755) if it is missing, creates the socket under
// a umask of 077 (mode 0700: only its owner, root, can connect), and
// replaces a socket file left by a process gone (a connection to it
// refused, ECONNREFUSED). A socket that accepts a connection, or whose
// backlog is full (EAGAIN: a live server that does not keep up), is
// another's, and the name is refused; so is a path that holds anything
// but a socket (a file or a directory), which wireguard-go removed. Close
// removes the socket file only if it is still the one Listen made: after
// `rm` of the file and a second gateway of the name, the first's Close
// took the second's socket away. name must be an interface name
// (ValidName).
//
// Not wireguard-go's ipc.UAPIOpen and ipc.UAPIListen. The listener of
// UAPIListen accepts in a goroutine of its own that ends at the first
// failed accept, so that one connection made while the process had no file
// descriptor free (EMFILE) left the socket deaf until a restart, every
// later `wg show` waiting in the listen backlog (TestListenOutlivesEMFILE);
// closed while clients dialled it, it could leave that goroutine blocked
// for good on a connection nobody took, the connection open. UAPIOpen
// returns a copy of its listener's descriptor and leaves the original to
// the garbage collector: after Close the socket stayed open, and the
// connections in its backlog waited unanswered until the next collection
// (TestListenCloseUnderDialling). UAPIListen's other goroutine watches the
// socket file and reports its removal, which wireguard-go's command takes
// as the order to exit (wg-quick's way of bringing a userspace interface
// down); a gateway never did: removing the file leaves it running without a
// configuration socket (README, "The configuration socket").
//
// The error names the socket and what failed: another process serving the
// name, a path that holds something else, or (EACCES, EPERM) no right to
// create SocketDir or a socket in it.
func Listen(name string) (net.Listener, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("UAPI socket: name %q: want an interface name, 1 to 15 bytes, no '/', ':', '%%' or white space", name)
	}
	path := filepath.Join(SocketDir, name+".sock")
	if err := os.MkdirAll(SocketDir, 0o755); err != nil {
		return nil, fmt.Errorf("UAPI socket %s: %w", path, err)
	}
	l, err := listenUnix(path)
	if errors.Is(err, syscall.EADDRINUSE) {
		if err := removeStale(path, name); err != nil {
			return nil, err
		}
		l, err = listenUnix(path)
	}
	if err != nil {
		return nil, fmt.Errorf("UAPI socket %s: %w", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("UAPI socket %s: %w", path, err)
	}
	return &listener{UnixListener: l, path: path, file: fi}, nil
}

// ValidName reports whether name can name an interface (Linux
// dev_valid_name: 1 to 15 bytes, not "." or "..", no '/', ':' or white
// space; nor '%', the kernel's name template), as wg(8) expects of a
// device's name and the socket's file needs: a '/' put it elsewhere
// ("../../tmp/x" made /tmp/x.sock).
func ValidName(name string) bool {
	return name != "" && len(name) <= 15 && name != "." && name != ".." && !strings.ContainsAny(name, "/:% \t\n\v\f\r")
}

// removeStale removes the socket file at path, which a bind found taken,
// if no process serves it: a connection to it is refused (ECONNREFUSED).
// Otherwise (it accepts, its backlog is full, it is not a socket) the
// name is another's, and the error says so.
func removeStale(path, name string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // gone meanwhile
	}
	if err != nil {
		return fmt.Errorf("UAPI socket %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("UAPI socket %s: the path holds something else (%v), not a socket: remove it, or choose another name than %s", path, fi.Mode().Type(), name)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("UAPI socket %s: in use (%s is served already, by this process or another)", path, name)
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
	case errors.Is(err, fs.ErrPermission) && !listening(path):
		// Another user's socket (a root gateway killed with SIGKILL,
		// under a directory the service user owns) that no socket of
		// this network namespace listens on: stale too. A start as
		// that user failed on it for good, saying it was served.
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("UAPI socket %s: in use (%s is served already, by another user's process: %w)", path, name, err)
	default:
		// EAGAIN: a server whose backlog is full; a timeout: one
		// that is slow. Alive either way.
		return fmt.Errorf("UAPI socket %s: in use (%s is served already, and a connection to it failed: %w)", path, name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("UAPI socket %s: remove the stale socket: %w", path, err)
	}
	return nil
}

// listening reports whether a socket of the calling thread's network
// namespace listens on the Unix socket file path (/proc/thread-self/net/unix:
// a line whose flags have __SO_ACCEPTCON, 0x10000, and whose path is
// path), true when the list cannot be read.
func listening(path string) bool {
	b, err := os.ReadFile("/proc/thread-self/net/unix")
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 || f[7] != path {
			continue
		}
		if flags, err := strconv.ParseUint(f[3], 16, 32); err != nil || flags&0x10000 != 0 {
			return true
		}
	}
	return false
}

// umaskMu serializes listenUnix's umask changes: two at once could leave
// the process's umask at 077 for good (each restoring what the other
// set).
var umaskMu sync.Mutex

// listenUnix listens on a new socket file at path with mode 0700. (The
// umask is the process's: a file another goroutine creates meanwhile gets
// a mode no wider than it asked for, only narrower, as with
// wireguard-go, which does the same.)
func listenUnix(path string) (*net.UnixListener, error) {
	umaskMu.Lock()
	defer umaskMu.Unlock()
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	l.SetUnlinkOnClose(false) // listener.Close removes it, if still ours
	return l, nil
}

// listener is Listen's listener: its Close removes the socket file only
// if it is still the one Listen made (file).
type listener struct {
	*net.UnixListener
	path string
	file os.FileInfo
	once sync.Once
}

// Close removes the socket file if it is still the listener's (the same
// file: os.SameFile), then closes the socket. Another process that
// replaces the file between the check and the removal loses it, a window
// of microseconds; one that replaced it before keeps it.
func (l *listener) Close() error {
	l.once.Do(func() {
		if fi, err := os.Lstat(l.path); err == nil && os.SameFile(fi, l.file) {
			os.Remove(l.path)
		}
	})
	return l.UnixListener.Close()
}
