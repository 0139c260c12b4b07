package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testing/sockettest"
	"github.com/wgpio/wgpio/internal/uapiserve"

	"github.com/google/go-cmp/cmp"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/noise"
)

// serve runs ServeUAPI on one end of a pipe and returns the other.
func serve(t testing.TB, d *Device) net.Conn {
	t.Helper()
	c, s := net.Pipe()
	go d.ServeUAPI(s)
	t.Cleanup(func() { c.Close() })
	return c
}

// readErrno reads the "errno=N\n\n" that ends a reply.
func readErrno(t testing.TB, r *bufio.Reader) int64 {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read reply: %v", err)
		}
		var n int64
		if _, err := fmt.Sscanf(line, "errno=%d\n", &n); err == nil {
			if _, err := r.ReadString('\n'); err != nil {
				t.Fatalf("read reply end: %v", err)
			}
			return n
		}
	}
}

// TestUAPILongLineBounded: eight connections at once each send a set
// request with a 32 MiB line: each is answered EMSGSIZE, its connection
// stays usable (a get follows), and the heap does not grow with what they
// sent.
func TestUAPILongLineBounded(t *testing.T) {
	d := ourDevice(t, "")
	const conns, lineLen = 8, 32 << 20
	chunk := []byte(strings.Repeat("a", 1<<20))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var peak uint64
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range conns {
		c := serve(t, d)
		wg.Add(1)
		go func() {
			defer wg.Done()
			go func() {
				io.WriteString(c, "set=1\nprivate_key=")
				for range lineLen / len(chunk) {
					c.Write(chunk)
					if i == 0 {
						var m runtime.MemStats
						runtime.ReadMemStats(&m)
						mu.Lock()
						peak = max(peak, m.HeapAlloc)
						mu.Unlock()
					}
				}
				io.WriteString(c, "\n\nget=1\n\n")
			}()
			r := bufio.NewReader(c)
			if n := readErrno(t, r); n != -int64(syscall.EMSGSIZE) {
				t.Errorf("set with a %d-byte line: errno %d, want %d (EMSGSIZE)", lineLen, n, -int64(syscall.EMSGSIZE))
			}
			if n := readErrno(t, r); n != 0 {
				t.Errorf("get after the long line: errno %d, want 0", n)
			}
		}()
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	const heapCap = 16 << 20
	if grew := int64(peak) - int64(before.HeapAlloc); grew > heapCap {
		t.Errorf("heap grew %d bytes while %d connections sent %d-byte lines, want under %d", grew, conns, lineLen, heapCap)
	}

	// The operation line too.
	c := serve(t, d)
	go func() {
		for range 4 {
			c.Write(chunk) // no newline: a 4 MiB "operation"
		}
		io.WriteString(c, "\n")
	}()
	if n := readErrno(t, bufio.NewReader(c)); n != -int64(syscall.EMSGSIZE) {
		t.Errorf("4 MiB operation line: errno %d, want EMSGSIZE", n)
	}
}

// TestUAPIMillionPeerSetconf streams a 1,000,000-peer set request (about
// 120 MB, more than any buffer) over one connection: it is applied whole.
func TestUAPIMillionPeerSetconf(t *testing.T) {
	testenv.Short(t, "streams 1,000,000 peers")
	d := ourDevice(t, "")
	const peers = 1_000_000
	c := serve(t, d)
	go func() {
		w := bufio.NewWriterSize(c, 1<<16)
		w.WriteString("set=1\nreplace_peers=true\n")
		var k noise.PublicKey
		for i := range peers {
			k[0], k[1], k[2], k[3] = byte(i), byte(i>>8), byte(i>>16), 1
			fmt.Fprintf(w, "public_key=%s\nallowed_ip=10.%d.%d.%d/32\n", k.Hex(), byte(i>>16), byte(i>>8), byte(i))
		}
		w.WriteString("\n")
		w.Flush()
	}()
	if n := readErrno(t, bufio.NewReader(c)); n != 0 {
		t.Fatalf("1,000,000-peer set: errno %d, want 0", n)
	}
	if got := len(d.Peers()); got != peers {
		t.Errorf("peers after the set = %d, want %d", got, peers)
	}
}

// TestUAPIStalledClient: a client that stalls (a stopped `wg show`) frees
// its connection, and so its slot of uapiMaxConns, after the idle timeout,
// wherever it stalls: before the blank line ending a get, or while a reply
// waits to be read.
func TestUAPIStalledClient(t *testing.T) {
	const idle = 50 * time.Millisecond
	for _, tc := range []struct {
		name, send string
	}{
		{"no request", ""},
		{"get without its blank line", "get=1\n"},
		{"set without its end", "set=1\nlisten_port=1\n"},
		{"get reply never read", "get=1\n\n"},
		{"set reply never read", "set=1\nlisten_port=1\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := ourDevice(t, "")
			d.uapiIdle = idle
			c, s := net.Pipe()
			t.Cleanup(func() { c.Close() })
			done := make(chan struct{})
			go func() {
				d.ServeUAPI(s)
				close(done)
			}()
			if tc.send != "" {
				if _, err := io.WriteString(c, tc.send); err != nil {
					t.Fatalf("write request: %v", err)
				}
			}
			select {
			case <-done:
			case <-time.After(100 * idle):
				t.Fatalf("ServeUAPI still serving a client stalled after %q for %v, want it closed after %v", tc.send, 100*idle, idle)
			}
		})
	}
}

// TestUAPIInterruptedSetMatchesWireguardGo: a set request cut short on the
// socket (a line too long, a client that stalls or closes half-way) leaves
// what wireguard-go leaves: every whole line before the cut applied, none
// after it, whichever batch of ipcSetConn the cut falls in.
//
// The client stalls only once it has written all it sends: the server's
// idle timeout takes effect then (writtenConn). Taken from the clock
// alone, it cut a request whose writer or server a busy machine kept
// waiting for a CPU past it: "client stalls in a later batch" applied
// 1,955 peers of 2,650 with a timeout of 300 ms, on the 2-core machine
// beside two busy loops and other tests (and, at 50 ms, "line too long in
// a later batch" failed so at load 16).
func TestUAPIInterruptedSetMatchesWireguardGo(t *testing.T) {
	// idle is the server's timeout once the client has written all;
	// hang bounds a server that never ends the request and decides
	// nothing else.
	const idle, hang = 50 * time.Millisecond, time.Minute
	k1, k2, k3 := pubHex(t), pubHex(t), pubHex(t)
	head := "public_key=" + k1 + "\nallowed_ip=198.19.0.0/24\npublic_key=" + k2 + "\nallowed_ip=198.19.1.0/24\npersistent_keepalive_interval=25\n"
	// Far more than a batch (uapiBatchBytes): the cut falls in a later one.
	var many strings.Builder
	for i := 0; many.Len() < uapiBatchBytes+4096; i++ {
		var k noise.PublicKey
		k[0], k[1], k[2] = byte(i), byte(i>>8), 9
		fmt.Fprintf(&many, "public_key=%s\nallowed_ip=10.%d.%d.0/24\n", k.Hex(), byte(i>>8), byte(i))
	}
	long := "endpoint=" + strings.Repeat("1", 2*uapiMaxLine) + "\n"
	tail := "public_key=" + k3 + "\nallowed_ip=198.19.2.0/24\n\n"
	for _, tc := range []struct {
		name string
		sent string // what the client sends after set=1
		// applied is what wireguard-go applies of it; cut: the client
		// stalls or closes after sent.
		applied string
		stall   bool
		errno   int64 // our reply, when the client is still there
	}{
		{"line too long", head + long + tail, head, false, -int64(syscall.EMSGSIZE)},
		{"line too long in a later batch", many.String() + head + long + tail, many.String() + head, false, -int64(syscall.EMSGSIZE)},
		{"client stalls", head, head, true, 0},
		{"client stalls in a later batch", many.String() + head, many.String() + head, true, 0},
		{"client closes", head, head, false, 0},
		{"client closes in a later batch", many.String() + head, many.String() + head, false, 0},
		// A difference: wireguard-go applies the cut-off last line
		// (a listen port of 518, a /2 of a /24); we apply none of it.
		{"client closes within a line", head + "listen_port=518", head, false, 0},
		{"client closes within an allowed IP", head + "allowed_ip=198.19.9.0/2", head, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := refDevice(t, "")
			ref.IpcSet(tc.applied)
			ours := ourDevice(t, "")
			ours.uapiIdle = idle
			c, s := net.Pipe()
			defer c.Close()
			written := make(chan struct{})
			done := make(chan struct{})
			go func() {
				ours.ServeUAPI(newWrittenConn(s, written))
				close(done)
			}()
			go func() {
				io.WriteString(c, "set=1\n"+tc.sent) // returns once the server has read it all (net.Pipe)
				close(written)
				if !tc.stall && tc.errno == 0 {
					c.Close() // half-way through the request
				}
			}()
			if tc.errno != 0 {
				if n := readErrno(t, bufio.NewReader(c)); n != tc.errno {
					t.Errorf("errno %d, want %d", n, tc.errno)
				}
			}
			select {
			case <-done:
			case <-time.After(hang):
				if tc.errno == 0 {
					t.Fatalf("ServeUAPI still serving after %v", hang)
				}
			}
			refGet, err := ref.IpcGet()
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			if err := ours.IpcGet(&b); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(normalize(refGet, ""), normalize(b.String(), "")); diff != "" {
				if len(diff) > 2000 {
					diff = diff[:2000] + "..."
				}
				t.Errorf("get=1 after the interrupted set: %d peers, wireguard-go %d (-wireguard-go +ours):\n%s",
					strings.Count(b.String(), "public_key="), strings.Count(refGet, "public_key="), diff)
			}
		})
	}
}

// writtenConn is the server's end of a pipe whose read deadlines (the idle
// timeout) take effect only once the client has written all it sends
// (written closed), the last one set then applied as it was set: until
// then the client is writing, however long a busy machine keeps it or the
// server waiting for a CPU, not stalled.
type writtenConn struct {
	net.Conn
	written <-chan struct{}

	mu       sync.Mutex
	deadline time.Time // the last read deadline set
}

func newWrittenConn(c net.Conn, written <-chan struct{}) *writtenConn {
	w := &writtenConn{Conn: c, written: written}
	go func() {
		<-written
		w.mu.Lock()
		defer w.mu.Unlock()
		w.Conn.SetReadDeadline(w.deadline)
	}()
	return w
}

func (w *writtenConn) SetReadDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deadline = t
	select {
	case <-w.written:
		return w.Conn.SetReadDeadline(t)
	default:
		return nil
	}
}

// TestUAPIUnknownOperationLogBounded: an unknown operation of 60 KiB is
// logged by its first bytes and its length, not in full (each connection
// that sends one is logged).
func TestUAPIUnknownOperationLogBounded(t *testing.T) {
	d := ourDevice(t, "")
	var logs bytes.Buffer
	d.log = slog.New(slog.NewTextHandler(&logs, nil))
	c, s := net.Pipe()
	done := make(chan struct{})
	go func() { d.ServeUAPI(s); close(done) }()
	defer c.Close()
	if _, err := io.WriteString(c, strings.Repeat("x", 60<<10)+"\n"); err != nil {
		t.Fatal(err)
	}
	<-done
	if l := logs.String(); len(l) > 512 || !strings.Contains(l, "(61440 bytes)") {
		t.Errorf("log of a 60 KiB unknown operation: %d bytes, want its start and length: %.300q", len(l), l)
	}
}

// TestUAPISilentConnectionCut: a connection that sends no operation is
// closed after uapiOpTimeout, not the 10 s a request in progress may
// stall: each holds one of the uapiMaxConns places, and 64 of them kept
// `wg show` waiting 10 s. One that sends its operation at once is
// answered.
func TestUAPISilentConnectionCut(t *testing.T) {
	d := ourDevice(t, "")
	c := serve(t, d)
	start := time.Now()
	c.SetReadDeadline(start.Add(uapiIdleTimeout))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a silent connection: read %v, want EOF (closed)", err)
	}
	if took := time.Since(start); took < uapiOpTimeout/2 || took >= uapiIdleTimeout {
		t.Errorf("closed after %v, want about %v", took, uapiOpTimeout)
	}
	c = serve(t, d)
	io.WriteString(c, "get=1\n\n")
	if errno := readErrno(t, bufio.NewReader(c)); errno != 0 {
		t.Errorf("get: errno %d", errno)
	}
}

// TestUAPIStalledSetsWaitTogether: clients that each send "set=1" and
// nothing more are all cut after about the idle timeout, not one after
// another: each waited its 10 s only once it held the set lock, so 6 of
// them kept a reload waiting 60 s, and 64 (every place of uapiMaxConns)
// kept `wg show` and the reload waiting over 10 minutes. A set sent whole
// behind them is applied, and the set lock (which a reload takes) is free
// within a few timeouts.
func TestUAPIStalledSetsWaitTogether(t *testing.T) {
	const idle, stalled = 200 * time.Millisecond, 20
	d := ourDevice(t, "")
	d.uapiIdle = idle
	start := time.Now()
	var wg sync.WaitGroup
	for range stalled {
		c, s := net.Pipe()
		t.Cleanup(func() { c.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.ServeUAPI(s)
		}()
		if _, err := io.WriteString(c, "set=1\n"); err != nil {
			t.Fatalf("write request: %v", err)
		}
	}
	c := serve(t, d)
	go io.WriteString(c, "set=1\nlisten_port=4242\n\n")
	if errno := readErrno(t, bufio.NewReader(c)); errno != 0 {
		t.Errorf("a whole set behind %d stalled ones: errno %d, want 0", stalled, errno)
	}
	wg.Wait()
	d.setMu.Lock()
	took := time.Since(start)
	d.setMu.Unlock()
	// One after another they take stalled*idle (4 s).
	if took > 8*idle {
		t.Errorf("%d clients stalled after set=1 held the set lock %v, want about %v (%v one after another)", stalled, took, idle, stalled*idle)
	}
	d.mu.Lock()
	got := d.listenPort
	d.mu.Unlock()
	if got != 4242 {
		t.Errorf("listen port %d, want 4242", got)
	}
}

// TestUAPIStalledGetsBounded: connections that send get=1 and never read
// hold at most the reply budget between them, and a get from another
// connection is answered within a few seconds all the same. Each reply
// was formatted whole and held until its client read it or was cut after
// uapiIdle: 64 such clients held 1.5 GB more of a gateway with a million
// allowed IPs.
func TestUAPIStalledGetsBounded(t *testing.T) {
	const peers, stalled = 20_000, 16
	d := ourDevice(t, "")
	var b strings.Builder
	var k noise.PublicKey
	for i := range peers {
		k[0], k[1], k[2] = byte(i), byte(i>>8), 1
		fmt.Fprintf(&b, "public_key=%s\nallowed_ip=10.%d.%d.0/24\n", k.Hex(), byte(i>>8), byte(i))
	}
	if err := d.IpcSet(strings.NewReader(b.String())); err != nil {
		t.Fatal(err)
	}
	reply := d.getReplySize() // about 9 MB
	d.getReplies.Limit = 2*reply + reply/2
	for range stalled {
		c := serve(t, d)
		if _, err := io.WriteString(c, "get=1\n\n"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the stalled gets wait for room
	c := serve(t, d)
	type result struct {
		peers int
		errno int64
		err   error
	}
	got := make(chan result, 1)
	start := time.Now()
	go func() {
		var res result
		defer func() { got <- res }()
		if _, res.err = io.WriteString(c, "get=1\n\n"); res.err != nil {
			return
		}
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				res.err = err
				return
			}
			if strings.HasPrefix(line, "public_key=") {
				res.peers++
			}
			if _, err := fmt.Sscanf(line, "errno=%d\n", &res.errno); err == nil {
				return
			}
		}
	}()
	const within = 4 * time.Second // cut stalled replies after 1 s, not their 10 s
	select {
	case res := <-got:
		if res.err != nil || res.errno != 0 || res.peers != peers {
			t.Errorf("get beside %d stalled ones: %d peers, errno %d, err %v; want %d peers, errno 0", stalled, res.peers, res.errno, res.err, peers)
		}
		t.Logf("get beside %d stalled ones answered in %v", stalled, time.Since(start))
	case <-time.After(within):
		t.Errorf("get beside %d stalled ones: no reply within %v", stalled, within)
	}
	if peak := d.getReplies.Peak(); peak > d.getReplies.Limit {
		t.Errorf("get replies held at once: %d bytes, want at most the budget's %d (%d stalled replies of about %d bytes)", peak, d.getReplies.Limit, stalled, reply)
	}
}

// serveListener serves d's UAPI on a unix socket of the test's own, as
// Start serves /var/run/wireguard/NAME.sock (serveUAPI, which Close
// ends), and returns its path.
func serveListener(t *testing.T, d *Device) string {
	t.Helper()
	path := t.TempDir() + "/uapi.sock"
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	d.uapi = l
	d.wg.Add(1)
	d.mu.Unlock()
	go d.serveUAPI(l)
	return path
}

// TestUAPIConnectionsBounded: a client that opens many more connections
// than uapiMaxConns and sends nothing costs at most uapiMaxConns
// goroutines: the next uapiMaxConns wait for a place without one, the
// rest are refused at once (uapiserve.RefusalGet: they sent nothing) and
// counted (Stats.UAPIRefused). A get behind
// the silent ones is served once they are cut (after uapiOpTimeout,
// shortened here with uapiIdle), within uapiSlotWait; the silent ones are
// closed; Close closes the connections still open and returns at once.
// Before, connections over the limit waited in the listen backlog for as
// long as it took, uncounted (wireguard-go's own socket, and the compat
// modes', served every one in a goroutine of its own).
func TestUAPIConnectionsBounded(t *testing.T) {
	const idle, over = 2 * time.Second, 50
	d := ourDevice(t, "")
	d.uapiIdle = idle // silent connections are cut after it
	path := serveListener(t, d)
	base := runtime.NumGoroutine()
	dial := func() net.Conn { return sockettest.Dial(t, path) }
	var silent []net.Conn
	for range uapiMaxConns {
		silent = append(silent, dial())
	}
	// The first to wait: a get.
	get := dial()
	start := time.Now()
	if _, err := io.WriteString(get, "get=1\n\n"); err != nil {
		t.Fatal(err)
	}
	for range uapiMaxConns - 1 {
		silent = append(silent, dial())
	}
	// Dialled all before any is read: each refused one is answered
	// after RefuseTime without a request, in parallel.
	refused := make([]net.Conn, over)
	for i := range refused {
		refused[i] = dial()
	}
	for i, c := range refused {
		if got, ok := sockettest.RefusedWithin(c, 5*time.Second, uapiserve.RefusalGet); !ok {
			t.Fatalf("connection %d over %d served and %d waiting: got %q, want %q and closed within 5 s", i, uapiMaxConns, uapiMaxConns, got, uapiserve.RefusalGet)
		}
	}
	if g := runtime.NumGoroutine() - base; g > uapiMaxConns+8 {
		t.Errorf("%d goroutines more with %d connections open, want at most %d (uapiMaxConns and a few)", g, 2*uapiMaxConns+over, uapiMaxConns+8)
	}
	if got := d.Stats().UAPIRefused; got != over {
		t.Errorf("Stats().UAPIRefused = %d, want %d", got, over)
	}

	get.SetReadDeadline(time.Now().Add(uapiSlotWait))
	if errno := readErrno(t, bufio.NewReader(get)); errno != 0 {
		t.Errorf("get behind %d silent connections: errno %d", uapiMaxConns, errno)
	}
	if took := time.Since(start); took < idle/2 || took > 3*idle {
		t.Errorf("get behind %d silent connections served after %v, want about %v (when they are cut)", uapiMaxConns, took, idle)
	}
	for i, c := range silent[:uapiMaxConns] {
		if !sockettest.ClosedWithin(c, 3*idle) {
			t.Errorf("silent connection %d not closed within %v", i, 3*idle)
		}
	}
	// The waiting silent ones were served after the get, not refused.
	if got := d.Stats().UAPIRefused; got != over {
		t.Errorf("Stats().UAPIRefused = %d after the waiting connections were served, want %d", got, over)
	}

	start = time.Now()
	d.Close()
	if took := time.Since(start); took > idle/2 {
		t.Errorf("Close with %d silent connections open took %v, want it to close them at once", uapiMaxConns-1, took)
	}
	for i, c := range silent[uapiMaxConns:] {
		if !sockettest.ClosedWithin(c, time.Second) {
			t.Errorf("connection %d still open after Close", uapiMaxConns+i)
		}
	}
}

// TestWgToolRefused: Debian's wg(8), refused by a gateway whose UAPI
// socket has uapiMaxConns connections served and as many waiting (held
// open by a client that sends nothing), says why: "Resource temporarily
// unavailable" (uapiserve.Refuse), for `wg show`, for `wg set`, which
// changes nothing, and for a `wg setconf` of 1,000 peers. Closed
// unanswered before, the connection left wg with "Protocol error",
// "Connection reset by peer", or a silent death by SIGPIPE. Once the held
// connections go, a set works.
func TestWgToolRefused(t *testing.T) {
	testenv.Root(t)
	wg := testenv.Tool(t, "wg", "wireguard-tools")
	name := uniqueName("wgpio")
	d := ourDevice(t, name)
	path := "/var/run/wireguard/" + name + ".sock"
	var held []net.Conn
	for range 2 * uapiMaxConns {
		held = append(held, sockettest.Dial(t, path))
	}
	// The socket accepts in order: wg's connection comes after them,
	// with every place taken and uapiMaxConns waiting, within the 10 s
	// (uapiIdleTimeout) the served ones are kept.
	// A setconf of 1,000 peers (some 100 KB): wg writes it whole before
	// it reads the reply, and died of SIGPIPE, silent, when the
	// refusal closed the socket under it.
	priv, _ := hexKey(t)
	var conf strings.Builder
	fmt.Fprintf(&conf, "[Interface]\nPrivateKey = %s\n", priv.Base64())
	for i := range 1000 {
		k, _ := hexKey(t)
		fmt.Fprintf(&conf, "\n[Peer]\nPublicKey = %s\nAllowedIPs = 198.19.%d.%d/32\n", k.PublicKey().Base64(), i>>8, i&255)
	}
	confFile := filepath.Join(t.TempDir(), "big.conf")
	if err := os.WriteFile(confFile, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"show", name}, {"set", name, "listen-port", "51998"}, {"setconf", name, confFile}} {
		out, err := exec.Command(wg, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Resource temporarily unavailable") {
			t.Errorf("wg %s with %d connections held: %v, %q; want a failure saying \"Resource temporarily unavailable\"", strings.Join(args, " "), len(held), err, out)
		}
	}
	// wg(8) connects once to see the socket is alive, and again for
	// the request.
	if got := d.Stats().UAPIRefused; got < 2 {
		t.Errorf("Stats().UAPIRefused = %d, want 2 or more", got)
	}
	for _, c := range held {
		c.Close()
	}
	// The server sees them go a moment later: until then it refuses.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, err := exec.Command(wg, "set", name, "listen-port", "51998").CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("wg set 10 s after the connections were closed: %v, %s", err, out)
		}
	}
	if out, err := exec.Command(wg, "show", name, "listen-port").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "51998" {
		t.Errorf("wg show %s listen-port: %v, %q; want 51998", name, err, out)
	}
}
