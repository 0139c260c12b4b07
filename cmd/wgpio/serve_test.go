//go:build linux

package main

import (
	"bufio"
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/noise"
)

// fakeDevice is a uapiDevice that records what is set; each set waits
// for release when it is not nil.
type fakeDevice struct {
	mu      sync.Mutex
	sets    []string
	entered chan struct{} // a set began
	release chan struct{}
}

func (d *fakeDevice) uapi() uapiDevice {
	return uapiDevice{
		get: func() (string, error) { return "", nil },
		set: func(body string) error {
			select {
			case d.entered <- struct{}{}:
			default:
			}
			if d.release != nil {
				<-d.release
			}
			d.mu.Lock()
			d.sets = append(d.sets, body)
			d.mu.Unlock()
			return nil
		},
	}
}

func (d *fakeDevice) nsets() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.sets)
}

// serveAsync runs serve on a goroutine and returns the channel of its
// result.
func serveAsync(t *testing.T, path string, dev uapiDevice, sigs signals) (<-chan os.Signal, *testenv.LogBuffer) {
	t.Helper()
	var logBuf testenv.LogBuffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	out := make(chan os.Signal, 1)
	go func() {
		sig, _ := serve(log, &config.File{Name: path}, dev, nil, sigs)
		out <- sig
	}()
	return out, &logBuf
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// testSignals registers serve's signals for the test and removes them
// after it.
func testSignals(t *testing.T) signals {
	sigs := notifySignals(nil)
	t.Cleanup(func() { signal.Stop(sigs.stop); signal.Stop(sigs.reload) })
	return sigs
}

func kill(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), sig); err != nil {
		t.Fatal(err)
	}
}

func wantStop(t *testing.T, out <-chan os.Signal, within time.Duration) {
	t.Helper()
	select {
	case sig := <-out:
		if sig != syscall.SIGTERM {
			t.Errorf("serve returned %v, want SIGTERM", sig)
		}
	case <-time.After(within):
		t.Fatalf("serve did not return within %v of SIGTERM", within)
	}
}

func writeConfig(t *testing.T) string {
	t.Helper()
	k, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	f := config.File{Interface: config.Interface{PrivateKey: k}}
	path := filepath.Join(t.TempDir(), "wg0.conf")
	if err := os.WriteFile(path, f.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestServeStopDuringReload: a SIGTERM sent while a reload is applied
// and another SIGHUP waits (systemctl reload twice, then stop) stops
// serve; the two shared one channel of one place, the SIGHUP took it and
// the SIGTERM was dropped: the gateway ran on.
func TestServeStopDuringReload(t *testing.T) {
	sigs := testSignals(t)
	path := writeConfig(t)
	dev := &fakeDevice{entered: make(chan struct{}, 1), release: make(chan struct{})}
	out, _ := serveAsync(t, path, dev.uapi(), sigs)
	time.Sleep(50 * time.Millisecond) // serve waiting
	kill(t, syscall.SIGHUP)
	select {
	case <-dev.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("no reload after SIGHUP")
	}
	kill(t, syscall.SIGHUP)
	time.Sleep(50 * time.Millisecond) // the SIGHUP delivered first
	kill(t, syscall.SIGTERM)
	time.Sleep(50 * time.Millisecond)
	close(dev.release)
	wantStop(t, out, 5*time.Second)
}

// TestServeStopDuringRead: a SIGTERM while the file's read does not end
// (here a FIFO no one writes, let through: a hung network file system)
// stops serve; the read blocked serve, which never saw the SIGTERM.
func TestServeStopDuringRead(t *testing.T) {
	reloadCheck = func(string) error { return nil }
	t.Cleanup(func() { reloadCheck = reloadable })
	sigs := testSignals(t)
	path := filepath.Join(t.TempDir(), "wg0.conf")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	dev := &fakeDevice{entered: make(chan struct{}, 1)}
	out, _ := serveAsync(t, path, dev.uapi(), sigs)
	kill(t, syscall.SIGHUP)
	time.Sleep(100 * time.Millisecond)
	kill(t, syscall.SIGTERM)
	wantStop(t, out, 5*time.Second)
	// Unblock the read left behind, so that it ends with the test.
	if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
		w.Close()
	}
}

// TestServeSignalsBeforeServe: a SIGHUP and a SIGTERM sent while the
// gateway starts, before serve runs, wait for it: no default action ends
// the process half set up (Go's default for both), and serve returns the
// SIGTERM first.
func TestServeSignalsBeforeServe(t *testing.T) {
	sigs := testSignals(t)
	path := writeConfig(t)
	kill(t, syscall.SIGHUP)
	kill(t, syscall.SIGTERM)
	time.Sleep(50 * time.Millisecond)
	dev := &fakeDevice{entered: make(chan struct{}, 1)}
	out, _ := serveAsync(t, path, dev.uapi(), sigs)
	wantStop(t, out, 5*time.Second)
}

// TestServeReloadStorm: a storm of SIGHUPs is coalesced into a few
// reloads, each applied whole, the last one after the storm; a file that
// does not parse is logged and not applied.
func TestServeReloadStorm(t *testing.T) {
	sigs := testSignals(t)
	path := writeConfig(t)
	dev := &fakeDevice{entered: make(chan struct{}, 1)}
	out, logBuf := serveAsync(t, path, dev.uapi(), sigs)
	for range 200 {
		kill(t, syscall.SIGHUP)
	}
	for end := time.Now().Add(5 * time.Second); dev.nsets() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("no reload after 200 SIGHUPs")
		}
	}
	if err := os.WriteFile(path, []byte("[Interface]\nPrivateKey = nonsense\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kill(t, syscall.SIGHUP)
	// serve takes a SIGTERM before a waiting SIGHUP: stop it once the
	// reload of the file that does not parse is logged (a reload of the
	// storm may still have been reading the valid file, and is applied
	// and logged before it).
	const notApplied = "reload: configuration not applied"
	for end := time.Now().Add(10 * time.Second); !strings.Contains(logBuf.String(), notApplied); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("log lacks the failed reload 10 s after the SIGHUP:\n%s", logBuf.String())
		}
	}
	kill(t, syscall.SIGTERM)
	wantStop(t, out, 5*time.Second)
	// Each set is a reload of the valid file, which logs that it applied
	// it after the set: none is of the file that does not parse.
	if got, applied := dev.nsets(), strings.Count(logBuf.String(), "reload: peers, PrivateKey, ListenPort and FwMark applied"); got != applied {
		t.Errorf("%d sets, %d reloads logged as applied: a SIGHUP with a file that does not parse set something", got, applied)
	}
}

// TestSecondStopAbortsStart: while the gateway starts (here a start that
// never ends), a first SIGTERM is held and logged, and a second stop
// signal (SIGINT: Ctrl-C again) aborts the start at once; a start that
// finishes hands the held signal to serve, which stops the gateway
// cleanly. Before, stop signals were registered on a channel of one
// place before the start, so the second was dropped and only SIGKILL
// ended a start that hung.
func TestSecondStopAbortsStart(t *testing.T) {
	logged := func(t *testing.T, b *bytes.Buffer, mu *sync.Mutex, want string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			mu.Lock()
			got := b.String()
			mu.Unlock()
			if strings.Contains(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("log lacks %q:\n%s", want, got)
			}
		}
	}
	newLog := func() (*slog.Logger, *bytes.Buffer, *sync.Mutex) {
		var b bytes.Buffer
		var mu sync.Mutex
		return slog.New(slog.NewTextHandler(lockedWriter{&mu, &b}, nil)), &b, &mu
	}
	const held = "stop requested while the gateway starts"

	t.Run("second aborts", func(t *testing.T) {
		sigs := testSignals(t)
		log, b, mu := newLog()
		aborted := make(chan os.Signal, 1)
		sigs.started = watchStart(log, sigs.stop, func(sig os.Signal) { aborted <- sig })
		defer sigs.started()
		kill(t, syscall.SIGTERM)
		logged(t, b, mu, held)
		select {
		case sig := <-aborted:
			t.Fatalf("start aborted on the first signal (%v)", sig)
		default:
		}
		kill(t, syscall.SIGINT)
		select {
		case sig := <-aborted:
			if sig != syscall.SIGINT {
				t.Errorf("abort(%v), want abort(SIGINT)", sig)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a second stop signal during the start did not abort it")
		}
	})

	t.Run("process exits", func(t *testing.T) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), hangingStartEnv+"=1")
		var mu sync.Mutex
		var stderr bytes.Buffer
		cmd.Stderr = lockedWriter{&mu, &stderr}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		defer func() {
			cmd.Process.Kill()
			<-done
		}()
		if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "starting\n" {
			t.Fatalf("child said %q (%v), want \"starting\"", line, err)
		}
		cmd.Process.Signal(syscall.SIGTERM)
		logged(t, &stderr, &mu, held)
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-done:
			done <- err // for the deferred Wait
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("child exit: %v, want status 1", err)
			}
			mu.Lock()
			out := stderr.String()
			mu.Unlock()
			if !strings.Contains(out, "second stop signal while the gateway starts: start aborted") {
				t.Errorf("child's log does not say why it stopped:\n%s", out)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the child did not exit on a second stop signal during its start")
		}
	})

	t.Run("first waits for serve", func(t *testing.T) {
		sigs := testSignals(t)
		log, b, mu := newLog()
		sigs.started = watchStart(log, sigs.stop, func(sig os.Signal) { t.Errorf("abort(%v) after one signal", sig) })
		kill(t, syscall.SIGTERM)
		logged(t, b, mu, held)
		out, _ := serveAsync(t, writeConfig(t), (&fakeDevice{}).uapi(), sigs)
		wantStop(t, out, 10*time.Second)
	})
}

// hangingStartEnv set to 1 makes the test binary hangingStart instead of
// running tests (TestMain).
const hangingStartEnv = "WGPIO_TEST_HANGING_START"

// hangingStart is the child of TestSecondStopAbortsStart's "process
// exits": cmdUp's signal handling around a start that never ends. It
// says "starting" on stdout, then waits.
func hangingStart() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	sigs := notifySignals(nil)
	sigs.started = watchStart(log, sigs.stop, abortStart(log))
	os.Stdout.WriteString("starting\n")
	select {}
}

// TestServeReloadLogsWarnings: a reload logs the warnings of the file it
// applies (its mode, when every user may read it; a key wgpio ignores, a
// prefix that a later peer takes from an earlier one), as `wgpio up` does
// at start and `wgpio check` does by hand. Before, a reload by `kill -HUP` applied the file silently: a new
// peer whose AllowedIPs took another road warrior's address was logged
// nowhere.
func TestServeReloadLogsWarnings(t *testing.T) {
	sigs := testSignals(t)
	path := writeConfig(t)
	dev := &fakeDevice{entered: make(chan struct{}, 1)}
	out, logBuf := serveAsync(t, path, dev.uapi(), sigs)
	k, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := func() string {
		p, err := noise.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		return p.PublicKey().Base64()
	}
	text := "[Interface]\nPrivateKey = " + k.Base64() + "\nDNS = 198.18.1.2\n" +
		"[Peer]\nPublicKey = " + pub() + "\nAllowedIPs = 198.18.9.2/32\n" +
		"[Peer]\nPublicKey = " + pub() + "\nAllowedIPs = 198.18.9.2/32\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o604); err != nil {
		t.Fatal(err)
	}
	kill(t, syscall.SIGHUP)
	for end := time.Now().Add(5 * time.Second); dev.nsets() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("no reload after SIGHUP")
		}
	}
	kill(t, syscall.SIGTERM)
	wantStop(t, out, 5*time.Second)
	got := logBuf.String()
	for _, want := range []string{
		"world accessible",
		`wg0.conf:3: key \"DNS\": ignored`,
		`wg0.conf:9: key \"AllowedIPs\": 198.18.9.2/32 is also in the [Peer] at line 4`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("reload log lacks %q:\n%s", want, got)
		}
	}
}

// TestServeNotifiesSystemd: serve tells systemd (NOTIFY_SOCKET, as
// dist/wgpio.service's Type=notify wants) that the gateway is ready when
// it begins, and that it stops when it returns: systemd then holds a
// `systemctl reload` until the gateway can take it. Under Type=simple a
// SIGHUP sent in the first tenths of a second, before main ran, ended the
// process, which systemd took for a clean exit.
func TestServeNotifiesSystemd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	sigs := testSignals(t)
	out, _ := serveAsync(t, filepath.Join(t.TempDir(), "wg0.conf"), (&fakeDevice{}).uapi(), sigs)
	read := func() string {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 256)
		n, err := conn.Read(b)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return string(b[:n])
	}
	if got := read(); got != "READY=1" {
		t.Errorf("serve's first notification %q, want READY=1", got)
	}
	kill(t, syscall.SIGTERM)
	wantStop(t, out, 10*time.Second)
	if got := read(); got != "STOPPING=1" {
		t.Errorf("serve's notification at its end %q, want STOPPING=1", got)
	}
}

// TestServeReloadRefusesFIFO: a reload of a path made a FIFO is refused
// at once, with the path and why, and a reload after the file is back
// applies it. Before, the read hung until something wrote the FIFO, and
// every later SIGHUP waited behind it without a line in the log.
func TestServeReloadRefusesFIFO(t *testing.T) {
	sigs := testSignals(t)
	path := writeConfig(t)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	dev := &fakeDevice{entered: make(chan struct{}, 1)}
	out, logBuf := serveAsync(t, path, dev.uapi(), sigs)
	kill(t, syscall.SIGHUP)
	const refused = "is a named pipe, not a regular file"
	for end := time.Now().Add(10 * time.Second); !strings.Contains(logBuf.String(), refused); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no refusal of the FIFO 10 s after the SIGHUP:\n%s", logBuf.String())
		}
	}
	os.Remove(path)
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	kill(t, syscall.SIGHUP)
	for end := time.Now().Add(10 * time.Second); dev.nsets() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the file back, a SIGHUP applied nothing:\n%s", logBuf.String())
		}
	}
	kill(t, syscall.SIGTERM)
	wantStop(t, out, 5*time.Second)
}

// TestServeReloadLogsWait: a reload that waited for a UAPI set request
// in progress (a stalled `wg set` client holds it up to 10 s, and such
// clients queue) says so and for how long; it waited without a word.
func TestServeReloadLogsWait(t *testing.T) {
	sigs := testSignals(t)
	path := writeConfig(t)
	applied := make(chan struct{}, 1)
	dev := uapiDevice{
		get: func() (string, error) { return "", nil },
		set: func(string) error { return nil },
		update: func(edit func(string) (string, error)) error {
			time.Sleep(reloadWaitLogged + 100*time.Millisecond) // the set in progress
			_, err := edit("")
			applied <- struct{}{}
			return err
		},
	}
	out, logBuf := serveAsync(t, path, dev, sigs)
	kill(t, syscall.SIGHUP)
	select {
	case <-applied:
	case <-time.After(10 * time.Second):
		t.Fatalf("no reload 10 s after the SIGHUP:\n%s", logBuf.String())
	}
	const said = "reload: waited for a UAPI set request in progress"
	for end := time.Now().Add(5 * time.Second); !strings.Contains(logBuf.String(), said); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the reload's wait not logged:\n%s", logBuf.String())
		}
	}
	kill(t, syscall.SIGTERM)
	wantStop(t, out, 5*time.Second)
}

// TestServeReloadRefusesWhatCheckRefuses: a reloaded file that `wgpio
// check` refuses (here cut short by an editor: a WAN and no LAN, no peers)
// is not applied, as `systemctl reload`, whose ExecReload runs wgpio check
// first, applies none: the gateway runs on as it was. Before, kill -HUP
// applied it (every peer removed) and only then said that the next start
// with it would fail. The whole file, once written, is applied.
func TestServeReloadRefusesWhatCheckRefuses(t *testing.T) {
	sigs := testSignals(t)
	sigs.checkFile = func(f *config.File) error {
		w := f.WGPIO
		if w.Mode == "" {
			w.Mode = config.ModeFastPath
		}
		return checkFile(f, w)
	}
	path := writeConfig(t)
	dev := &fakeDevice{entered: make(chan struct{}, 1)}
	out, logBuf := serveAsync(t, path, dev.uapi(), sigs)
	k, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	head := "[Interface]\nPrivateKey = " + k.Base64() + "\nListenPort = 51820\n[WGPIO]\nWAN = wa"
	reload := func(text, wantLog string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		kill(t, syscall.SIGHUP)
		if !testenv.PollUntil(5*time.Second, func() bool { return strings.Contains(logBuf.String(), wantLog) }) {
			t.Fatalf("no %q in the log after SIGHUP:\n%s", wantLog, logBuf.String())
		}
	}
	reload(head+"\n", "configuration not applied")
	if n := dev.nsets(); n != 0 {
		t.Errorf("%d sets of a file wgpio check refuses, want 0", n)
	}
	if got := logBuf.String(); !strings.Contains(got, "needs WAN and LAN") {
		t.Errorf("the refusal does not say why:\n%s", got)
	}
	reload(head+"n0\nLAN = lan0\n", "peers, PrivateKey, ListenPort and FwMark applied")
	if n := dev.nsets(); n != 1 {
		t.Errorf("%d sets of the whole file, want 1", n)
	}
	kill(t, syscall.SIGTERM)
	wantStop(t, out, 5*time.Second)
}

// TestServeSlowReadWarned: a SIGHUP that finds the file's read of an
// earlier one under way is warned of only when that read is slow (1 s or
// more: a file system that hangs); a storm of SIGHUPs whose reads end at
// once logged a warning a read, each saying reading_for=0s.
func TestServeSlowReadWarned(t *testing.T) {
	reloadCheck = func(string) error { return nil }
	t.Cleanup(func() { reloadCheck = reloadable })
	sigs := testSignals(t)
	path := filepath.Join(t.TempDir(), "wg0.conf")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	dev := &fakeDevice{entered: make(chan struct{}, 1)}
	out, logBuf := serveAsync(t, path, dev.uapi(), sigs)
	const warned = "still reading the file for an earlier SIGHUP"
	// unblock ends the read under way (the FIFO's writer closes: an
	// empty file, refused), and the one queued begins.
	unblock := func() {
		if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
	}
	kill(t, syscall.SIGHUP)
	time.Sleep(100 * time.Millisecond)
	kill(t, syscall.SIGHUP) // the read under way for 100 ms: not slow
	time.Sleep(100 * time.Millisecond)
	if strings.Contains(logBuf.String(), warned) {
		t.Errorf("warned of a read under way for 100 ms:\n%s", logBuf.String())
	}
	unblock() // the queued read begins
	time.Sleep(1200 * time.Millisecond)
	kill(t, syscall.SIGHUP) // that read under way for over a second: slow
	if !testenv.PollUntil(5*time.Second, func() bool { return strings.Contains(logBuf.String(), warned) }) {
		t.Errorf("no warning of a read under way for over a second:\n%s", logBuf.String())
	}
	kill(t, syscall.SIGTERM)
	wantStop(t, out, 5*time.Second)
	unblock()
}
