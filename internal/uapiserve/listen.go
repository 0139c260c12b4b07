package uapiserve

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
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
// replaces a socket file left by a process gone; one that still accepts a
// connection is another process's, and the name is refused.
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
// name, or (EACCES, EPERM) no right to create SocketDir or a socket in it.
func Listen(name string) (net.Listener, error) {
	path := filepath.Join(SocketDir, name+".sock")
	if err := os.MkdirAll(SocketDir, 0o755); err != nil {
		return nil, fmt.Errorf("UAPI socket %s: %w", path, err)
	}
	l, err := listenUnix(path)
	if errors.Is(err, syscall.EADDRINUSE) {
		// The file exists: a live socket, or one left by a process gone.
		if c, derr := net.DialTimeout("unix", path, time.Second); derr == nil {
			c.Close()
			return nil, fmt.Errorf("UAPI socket %s: in use (another process serves %s)", path, name)
		}
		if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return nil, fmt.Errorf("UAPI socket %s: remove the stale socket: %w", path, rerr)
		}
		l, err = listenUnix(path)
	}
	if err != nil {
		return nil, fmt.Errorf("UAPI socket %s: %w", path, err)
	}
	return l, nil
}

// listenUnix listens on a new socket file at path with mode 0700. (The
// umask is the process's: a file another goroutine creates meanwhile gets
// a mode no wider than it asked for, only narrower, as with
// wireguard-go, which does the same.)
func listenUnix(path string) (*net.UnixListener, error) {
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	l.SetUnlinkOnClose(true) // the default for ListenUnix; said, as Close relies on it
	return l, nil
}
