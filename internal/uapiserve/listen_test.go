//go:build linux

package uapiserve

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/downdev"
	"github.com/wgpio/wgpio/internal/testing/emfile"
	"github.com/wgpio/wgpio/internal/topo"
)

// emfileEnv names the interface whose UAPI socket emfileChild serves, the
// child process of TestListenOutlivesEMFILE.
const emfileEnv = "WGPIO_TEST_UAPI_EMFILE"

func TestMain(m *testing.M) {
	if name := os.Getenv(emfileEnv); name != "" {
		emfileChild(name)
	}
	os.Exit(m.Run())
}

// serveListener serves l as a gateway serves its UAPI socket (NewServer,
// Serve with a stock wireguard-go device that stays down) until l is
// closed; the channel it returns is closed when Serve has returned.
func serveListener(l net.Listener, log *slog.Logger) (done chan struct{}) {
	dev := downdev.New()
	done = make(chan struct{})
	go func() {
		defer close(done)
		defer dev.Close()
		NewServer(log).Serve(l, func(c net.Conn) {
			Serve(c, dev, func(r io.Reader) error { return dev.IpcSetOperation(r) }, log)
		})
	}()
	return done
}

// emfileChild serves the UAPI socket of name (Listen) in the child of
// TestListenOutlivesEMFILE, its descriptors used up (emfile.Fill), and
// exits when its stdin ends. Its log goes to stderr.
func emfileChild(name string) {
	l, err := Listen(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	done := serveListener(l, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	emfile.Fill()
	l.Close()
	<-done
	os.Exit(0)
}

// TestListenOutlivesEMFILE: `wg show` is answered again once a gateway
// that ran out of file descriptors has some back. With wireguard-go's
// UAPI listener, the accept of a connection that came while none was
// free (EMFILE) ended the listener's accepting goroutine for good: that
// `wg show` and every later one waited in the listen backlog until the
// gateway restarted. The failure is logged once, and the waiting client
// is answered.
func TestListenOutlivesEMFILE(t *testing.T) {
	testenv.Root(t)
	name := topo.UniqueName("wgue")
	child := emfile.Start(t, emfileEnv, name)
	c, err := net.Dial("unix", SocketDir+"/"+name+".sock")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "get=1\n\n"); err != nil {
		t.Fatal(err)
	}
	// The accept of this connection fails for want of a descriptor.
	child.WaitLog(t, 20*time.Second, "UAPI socket: accept failed", "too many open files")
	child.Free(t)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, errno := readReply(t, bufio.NewReader(c)); errno != "0" {
		t.Errorf("get after the descriptors came back: errno=%s, want 0", errno)
	}
	// The socket answers a connection made after as well.
	c2, err := net.Dial("unix", SocketDir+"/"+name+".sock")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c2, "get=1\n\n"); err != nil {
		t.Fatal(err)
	}
	if _, errno := readReply(t, bufio.NewReader(c2)); errno != "0" {
		t.Errorf("a later get: errno=%s, want 0", errno)
	}
}

// TestListenCloseUnderDialling: a UAPI socket closed while clients keep
// connecting to it leaves none of their connections open and nothing of
// its own running, and its file is gone. wireguard-go's listener handed
// connections over through a channel of one from a goroutine of its own:
// closed with one in the channel and the next accepted, that goroutine
// waited for ever to hand it over, and the client's connection stayed
// open (4 to 7 of 20 closes under such a flood); and the socket, its
// first descriptor left to the garbage collector, took connections after
// Close that nobody answered (24 in a round, under load).
func TestListenCloseUnderDialling(t *testing.T) {
	testenv.Root(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for round := range 20 {
		name := topo.UniqueName("wguc")
		path := SocketDir + "/" + name + ".sock"
		l, err := Listen(name)
		if err != nil {
			t.Fatal(err)
		}
		done := serveListener(l, log)
		var (
			mu    sync.Mutex
			conns []net.Conn
			stop  = make(chan struct{})
			wg    sync.WaitGroup
		)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					c, err := net.Dial("unix", path)
					if err != nil {
						continue // closed, or the backlog full
					}
					io.WriteString(c, "get=1\n\n")
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
				}
			}()
		}
		time.Sleep(20 * time.Millisecond)
		l.Close()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: Serve did not return 30 s after the listener closed", round)
		}
		close(stop)
		wg.Wait()
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("round %d: %s after close: %v, want it gone", round, path, err)
		}
		// Every connection ends: answered and closed, refused, or
		// reset with the socket.
		open := 0
		deadline := time.Now().Add(5 * time.Second)
		for _, c := range conns {
			c.SetReadDeadline(deadline)
			if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
				open++
			}
			c.Close()
		}
		if open > 0 {
			t.Errorf("round %d: %d of %d client connections still open 5 s after the socket closed", round, open, len(conns))
		}
	}
}

// TestListenSocketFile: the socket is made with mode 0700 and removed by
// Close; a socket file left by a process gone is replaced; one that a
// listener still serves is refused, naming the socket, and left alone.
func TestListenSocketFile(t *testing.T) {
	testenv.Root(t)
	name := topo.UniqueName("wgus")
	path := SocketDir + "/" + name + ".sock"
	t.Cleanup(func() { os.Remove(path) })
	// A stale socket: bound, then its descriptor closed without removing
	// the file, as a killed process leaves it.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	l, err := Listen(name)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: mode %v, want a socket of 0700", path, fi.Mode())
	}
	if _, err := Listen(name); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "in use") {
		t.Errorf("Listen of a name in use = %v, want an error naming %s, in use", err, path)
	}
	// The refused Listen left the serving socket in place.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the first listener's socket after a refused Listen: %v", err)
	}
	c.Close()
	l.Close()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after Close: %v, want it gone", path, err)
	}
	if _, err := net.Dial("unix", path); err == nil {
		t.Error("a connection after Close was taken")
	}
}

// TestListenRefusesLive: Listen replaces only a socket no process
// serves. A name whose socket accepts, or whose backlog is full (a live
// server that does not keep up: EAGAIN), or whose path holds a file or
// a directory, is refused with an error naming the path, and the path is
// left as it was. (The full backlog was taken for a stale socket and
// replaced; the file and an empty directory were removed.)
func TestListenRefusesLive(t *testing.T) {
	testenv.Root(t)
	if err := os.MkdirAll(SocketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := topo.UniqueName("wgul")
	path := SocketDir + "/" + name + ".sock"
	t.Cleanup(func() { os.RemoveAll(path) })
	refused := func(what string) {
		t.Helper()
		before, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		l, err := Listen(name)
		if err == nil {
			l.Close()
			t.Fatalf("%s: Listen took the name", what)
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v does not name %s", what, err, path)
		}
		if after, err := os.Lstat(path); err != nil || !os.SameFile(before, after) {
			t.Errorf("%s: the path changed under a refused Listen (%v)", what, err)
		}
	}
	// A live server whose backlog is full: a socket listening with a
	// backlog of 0 and a connection waiting in it.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	for range 4 {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err != nil {
			break // full
		}
		held = append(held, c)
	}
	refused("a socket with its backlog full")
	for _, c := range held {
		c.Close()
	}
	refused("a socket that accepts")
	syscall.Close(fd)
	os.Remove(path)
	if err := os.WriteFile(path, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused("a regular file")
	os.Remove(path)
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	refused("an empty directory")
}

// TestListenCloseKeepsAnothersFile: Close removes the socket file only if
// it is still the listener's. After `rm` of the file and a second
// listener of the name, the first's Close took the second's socket away:
// `wg` found no device while the second still ran.
func TestListenCloseKeepsAnothersFile(t *testing.T) {
	testenv.Root(t)
	name := topo.UniqueName("wguk")
	path := SocketDir + "/" + name + ".sock"
	t.Cleanup(func() { os.Remove(path) })
	l1, err := Listen(name)
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	l2, err := Listen(name)
	if err != nil {
		t.Fatalf("Listen after the first's file was removed: %v", err)
	}
	defer l2.Close()
	l1.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the second listener's socket after the first's Close: %v", err)
	}
	c.Close()
	l2.Close()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after the second's Close: %v, want it gone", path, err)
	}
}

// TestListenUmask: Listen calls at once leave the process's umask as it
// was. Each set 077 and put back what it found, and two interleaved left
// 077 for good (a later file of the process made 0600 where 0644 was
// meant).
func TestListenUmask(t *testing.T) {
	testenv.Root(t)
	before := syscall.Umask(0o022)
	syscall.Umask(before)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				name := fmt.Sprintf("wguu%d-%d", g, i)
				l, err := Listen(name)
				if err != nil {
					t.Error(err)
					return
				}
				l.Close()
			}
		}()
	}
	wg.Wait()
	after := syscall.Umask(before)
	if after != before {
		t.Errorf("umask %#o after the Listens, %#o before", after, before)
	}
}

// TestListenNames: a name that is not an interface's is refused before
// anything is made ("../x" made /var/run/x.sock).
func TestListenNames(t *testing.T) {
	for _, name := range []string{"", ".", "..", "../wgux", "a/b", "x\ny", "has space", "a:b", "wg%d", "sixteen-bytes-xx"} {
		if l, err := Listen(name); err == nil {
			l.Close()
			t.Errorf("Listen(%q) succeeded", name)
		}
	}
}
