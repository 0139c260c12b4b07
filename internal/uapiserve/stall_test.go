package uapiserve

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testing/sockettest"

	"golang.zx2c4.com/wireguard/device"

	"github.com/wgpio/wgpio/internal/testing/downdev"
)

// shortIdle sets idleTimeout to d for one test.
func shortIdle(t *testing.T, d time.Duration) {
	old := idleTimeout
	idleTimeout = d
	t.Cleanup(func() { idleTimeout = old })
}

// serveOn serves a fresh net.Pipe for dev, as the compat modes' accept
// loops do, one Serve per connection, and returns the client's end.
func serveOn(t *testing.T, dev *device.Device) net.Conn {
	t.Helper()
	client, server := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Serve(server, dev, func(r io.Reader) error { return dev.IpcSetOperation(r) }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	// A Serve stuck behind another connection's (without the bounds
	// of TestServeStalledClientsCut) returns when that one is closed,
	// by a later cleanup: not waited for past a bound.
	t.Cleanup(func() {
		client.Close()
		select {
		case <-done:
		case <-time.After(30 * time.Second): // only a hang; a starved CPU took over 5 s under -race
			t.Errorf("Serve did not return within 30 s of its client's closing")
		}
	})
	return client
}

// getWithin does a get=1 on a new connection to dev and fails the test
// unless its reply comes within d.
func getWithin(t *testing.T, dev *device.Device, d time.Duration) {
	t.Helper()
	c := serveOn(t, dev)
	got := make(chan error, 1)
	go func() {
		if _, err := io.WriteString(c, "get=1\n\n"); err != nil {
			got <- err
			return
		}
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				got <- err
				return
			}
			if strings.HasPrefix(line, "errno=") {
				got <- nil
				return
			}
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("get=1 beside a stalled client: %v", err)
		}
	case <-time.After(d):
		t.Fatalf("get=1 beside a stalled client: no reply in %v (the stalled client holds the device's IPC lock)", d)
	}
}

// TestServeStalledClientsCut: a client that stalls within a set=1 (its
// operation line and a first line, then nothing) is disconnected after
// idleTimeout, and another client's get is answered; one that does a
// get=1 and never reads the reply is disconnected likewise, and another
// client's set is answered. Before, wireguard-go
// held its IPC lock for as long as such a client stayed: `wg show`, every
// set and the gateway's reload waited without end (Mode = compat: a
// client that sent "set=1" and stopped held the gateway's SIGTERM behind
// a SIGHUP until it went away).
func TestServeStalledClientsCut(t *testing.T) {
	shortIdle(t, 100*time.Millisecond)
	const within = 10 * time.Second // far beyond idleTimeout: only a hang fails

	t.Run("set", func(t *testing.T) {
		dev := downdev.New()
		t.Cleanup(dev.Close)
		stalled := serveOn(t, dev)
		if _, err := io.WriteString(stalled, "set=1\nprivate_key="+keyA+"\n"); err != nil {
			t.Fatal(err)
		}
		getWithin(t, dev, within)
		// The stalled connection was closed: its read ends.
		stalled.SetReadDeadline(time.Now().Add(within))
		if _, err := io.Copy(io.Discard, stalled); err != nil {
			t.Errorf("the stalled set's connection was not closed: %v", err)
		}
	})

	t.Run("get", func(t *testing.T) {
		dev := downdev.New()
		t.Cleanup(dev.Close)
		// A reply longer than Serve's bufio.Writer, which wireguard-go
		// writes with its lock held.
		var peers strings.Builder
		peers.WriteString("private_key=" + keyA + "\n")
		for i := range 100 {
			peers.WriteString("public_key=" + strings.Repeat("0", 60) + hex4(i+1) + "\nallowed_ip=10.0." + strconv.Itoa(i) + ".0/24\n")
		}
		if err := dev.IpcSet(peers.String()); err != nil {
			t.Fatal(err)
		}
		// net.Pipe holds nothing: the reply's write waits for reads
		// that never come, with the IPC lock held for reading.
		unread := serveOn(t, dev)
		if _, err := io.WriteString(unread, "get=1\n\n"); err != nil {
			t.Fatal(err)
		}
		// One byte read: the reply's write has begun, and waits for
		// the rest to be read.
		if _, err := io.ReadFull(unread, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		// A set needs the lock for writing.
		setter := serveOn(t, dev)
		set := make(chan error, 1)
		go func() {
			if _, err := io.WriteString(setter, "set=1\nprivate_key="+keyB+"\n\n"); err != nil {
				set <- err
				return
			}
			_, err := bufio.NewReader(setter).ReadString('\n')
			set <- err
		}()
		select {
		case err := <-set:
			if err != nil {
				t.Errorf("set beside an unread get: %v", err)
			}
		case <-time.After(within):
			t.Errorf("set beside an unread get: no reply in %v", within)
		}
	})
}

// TestServeSlowSetRead: a set that arrives in pieces, each within
// idleTimeout of the last but all of it over several idleTimeouts, and
// that the device takes longer than idleTimeout to apply (thousands of
// peers created), is read whole when progressBytes arrive between pauses:
// the deadline counts the waits for the client, not the operation's time.
func TestServeSlowSetRead(t *testing.T) {
	// The pauses (pause, three of them) add up past idleTimeout, each
	// well under it: the rest of a window, some 500 ms, is for the
	// pipe's hand-offs (a read per 4 KiB, each a goroutine switch), which
	// count as waiting too and took the 50 ms left by 150 ms pauses
	// against 200 ms on a loaded CI machine.
	const idle, pause = time.Second, 450 * time.Millisecond
	shortIdle(t, idle)
	dev := downdev.New()
	t.Cleanup(dev.Close)
	c := serveOn(t, dev)
	// Lines of peers, progressBytes and more between pauses.
	var b strings.Builder
	for i := 0; b.Len() < 6*progressBytes; i++ {
		b.WriteString("public_key=" + strings.Repeat("0", 60) + hex4(i) + "\nallowed_ip=10.0.0.0/8\n")
	}
	body := b.String()
	reply := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(c).ReadString('\n')
		reply <- l
	}()
	if _, err := io.WriteString(c, "set=1\n"); err != nil {
		t.Fatal(err)
	}
	// Pieces of at least 2 progressBytes: each progressBytes of the
	// operation has at most one pause in it.
	n := len(body) / (2 * progressBytes)
	piece := (len(body) + n - 1) / n
	for len(body) > 0 {
		k := min(len(body), piece)
		if _, err := io.WriteString(c, body[:k]); err != nil {
			t.Fatalf("writing the set: %v", err)
		}
		body = body[k:]
		time.Sleep(pause) // under idleTimeout; the pauses add up past it
	}
	if _, err := io.WriteString(c, "\n"); err != nil {
		t.Fatal(err)
	}
	if l := <-reply; l != "errno=0\n" {
		t.Errorf("reply to a slow set = %q, want errno=0", l)
	}
}

func hex4(i int) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[i>>12&15], digits[i>>8&15], digits[i>>4&15], digits[i&15]})
}

// TestServeStalledSetsWaitTogether: clients that each send "set=1" and a
// line, then nothing, are all cut after about idleTimeout, not one after
// another: each waited its idleTimeout only once it held wireguard-go's
// IPC lock, so that N of them kept every set and the gateway's reload (a
// set) waiting N times idleTimeout (Mode = compat does not limit the
// connections in number). A set behind them is answered within a few
// idleTimeouts.
func TestServeStalledSetsWaitTogether(t *testing.T) {
	const idle, stalled = 200 * time.Millisecond, 20
	shortIdle(t, idle)
	dev := downdev.New()
	t.Cleanup(dev.Close)
	for range stalled {
		c := serveOn(t, dev)
		if _, err := io.WriteString(c, "set=1\nprivate_key="+keyA+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	// The stalled ones reach the lock first (their Serve goroutines
	// have read their lines: the writes returned).
	time.Sleep(idle / 4)
	setter := serveOn(t, dev)
	start := time.Now()
	if _, err := io.WriteString(setter, "set=1\nprivate_key="+keyB+"\n\n"); err != nil {
		t.Fatal(err)
	}
	setter.SetReadDeadline(start.Add(10 * time.Second))
	l, err := bufio.NewReader(setter).ReadString('\n')
	// One after another they take stalled*idle (4 s).
	if took := time.Since(start); err != nil || l != "errno=0\n" || took > 8*idle {
		t.Errorf("a set behind %d clients stalled after a line: %q, %v after %v, want errno=0 after about %v (%v one after another)", stalled, l, err, took, idle, stalled*idle)
	}
}

// TestServeStalledGetsBounded: connections that send get=1 and never read
// hold at most Replies' bound between them (wireguard-go formats each
// reply whole and held it, and its IPC lock, until the client read it or
// was cut after idleTimeout), and another connection's get is answered
// within a few seconds all the same.
func TestServeStalledGetsBounded(t *testing.T) {
	const stalled = 12
	dev := downdev.New()
	t.Cleanup(dev.Close)
	var peers strings.Builder
	for i := range 2000 {
		peers.WriteString("public_key=" + strings.Repeat("0", 60) + hex4(i+1) + "\nallowed_ip=10." + strconv.Itoa(i>>8) + "." + strconv.Itoa(i&255) + ".0/24\n")
	}
	if err := dev.IpcSet(peers.String()); err != nil {
		t.Fatal(err)
	}
	getWithin(t, dev, 10*time.Second) // the next gets' estimate (lastReply)
	reply := int(lastReply.Load())
	Replies.mu.Lock()
	oldLimit := Replies.Limit
	Replies.Limit, Replies.peak = 2*reply+reply/2, Replies.held
	Replies.mu.Unlock()
	t.Cleanup(func() {
		Replies.mu.Lock()
		Replies.Limit = oldLimit
		Replies.mu.Unlock()
	})
	for range stalled {
		c := serveOn(t, dev)
		if _, err := io.WriteString(c, "get=1\n\n"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the stalled gets wait for room
	start := time.Now()
	getWithin(t, dev, 4*time.Second) // stalled replies cut after ReplyStall, not idleTimeout
	t.Logf("get beside %d stalled ones answered in %v", stalled, time.Since(start))
	if peak := Replies.Peak(); peak > 2*reply+reply/2 {
		t.Errorf("get replies held at once: %d bytes, want at most the bound %d (%d stalled replies of %d bytes)", peak, 2*reply+reply/2, stalled, reply)
	}
}

// TestServeStalledSetHoldsNoLock: a client that sends set=1 and 100 KiB
// of peers (within the first progressBytes), then stalls, holds no
// lock while it stalls: another connection's get is answered within 2 s
// although the stall lasts idleTimeout (10 s). Before, wireguard-go read
// the lines after the first 4 KiB under its IPC lock, and the get waited
// out the stall.
func TestServeStalledSetHoldsNoLock(t *testing.T) {
	dev := downdev.New()
	t.Cleanup(dev.Close)
	var set strings.Builder
	set.WriteString("set=1\n")
	for i := 0; set.Len() < 100<<10; i++ {
		set.WriteString("public_key=" + strings.Repeat("0", 60) + hex4(i+1) + "\nallowed_ip=10." + strconv.Itoa(i>>8) + "." + strconv.Itoa(i&255) + ".0/24\n")
	}
	c := serveOn(t, dev)
	// net.Pipe: the write returns once Serve has read all of it.
	if _, err := io.WriteString(c, set.String()); err != nil {
		t.Fatal(err)
	}
	getWithin(t, dev, 2*time.Second)
}

// TestServeConnectionsBounded: a client that opens many more
// connections than MaxConns to a compat mode's UAPI socket (NewServer,
// Serve on each) and sends nothing costs at most MaxConns goroutines:
// the next MaxConns wait without one, the rest are refused at once
// (RefusalGet: they sent nothing) and counted. A get behind the silent
// ones is answered once they are cut after idleTimeout, and the silent
// ones are closed. Before, each
// connection had a goroutine and buffers of its own until idleTimeout,
// however many a client opened.
func TestServeConnectionsBounded(t *testing.T) {
	const idle, over = 2 * time.Second, 50
	shortIdle(t, idle)
	dev := downdev.New()
	t.Cleanup(dev.Close)
	path := t.TempDir() + "/uapi.sock"
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	srv := NewServer(slog.New(slog.NewTextHandler(io.Discard, nil)))
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln, func(c net.Conn) {
			Serve(c, dev, func(r io.Reader) error { return dev.IpcSetOperation(r) }, slog.New(slog.NewTextHandler(io.Discard, nil)))
		})
	}()
	t.Cleanup(func() {
		ln.Close()
		<-served
	})
	dial := func() net.Conn { return sockettest.Dial(t, path) }
	var silent []net.Conn
	for range MaxConns {
		silent = append(silent, dial())
	}
	get := dial()
	if _, err := io.WriteString(get, "get=1\n\n"); err != nil {
		t.Fatal(err)
	}
	for range MaxConns - 1 {
		dial()
	}
	// Dialled all before any is read: each refused one is answered
	// after RefuseTime without a request, in parallel.
	refused := make([]net.Conn, over)
	for i := range refused {
		refused[i] = dial()
	}
	for i, c := range refused {
		if got, ok := sockettest.RefusedWithin(c, 5*time.Second, RefusalGet); !ok {
			t.Fatalf("connection %d over %d served and %d waiting: got %q, want %q and closed within 5 s", i, MaxConns, MaxConns, got, RefusalGet)
		}
	}
	if g := runtime.NumGoroutine() - base; g > MaxConns+8 {
		t.Errorf("%d goroutines more with %d connections open, want at most %d (MaxConns and a few)", g, 2*MaxConns+over, MaxConns+8)
	}
	if got := srv.Refused(); got != over {
		t.Errorf("Refused() = %d, want %d", got, over)
	}
	get.SetReadDeadline(time.Now().Add(SlotWait))
	r := bufio.NewReader(get)
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("get behind %d silent connections: %v", MaxConns, err)
		}
		if strings.HasPrefix(l, "errno=") {
			if l != "errno=0\n" {
				t.Errorf("get behind %d silent connections: %q", MaxConns, l)
			}
			break
		}
	}
	for i, c := range silent {
		c.SetReadDeadline(time.Now().Add(5 * idle))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("silent connection %d: read %v, want EOF within %v", i, err, 5*idle)
		}
	}
}

// TestRefuse: a refused connection's reply follows its request's kind,
// as wg(8) reads it: a set's errno negative (RefusalSet), a get's
// positive (RefusalGet), and a get's when nothing or less than "set=1\n"
// came within the read deadline. The request is read to its end first
// (a large set is written whole, no broken pipe), applied never, and a
// whole request's client then reads EOF, not a reset.
func TestRefuse(t *testing.T) {
	ln, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var large strings.Builder
	large.WriteString("set=1\nreplace_peers=true\n")
	for large.Len() < 4<<20 {
		fmt.Fprintf(&large, "public_key=%064x\nallowed_ip=198.18.%d.%d/32\n", large.Len(), large.Len()>>8&255, large.Len()&255)
	}
	large.WriteString("\n")
	for _, tc := range []struct {
		sent  string
		want  []byte
		whole bool // a complete request: the client reads EOF after the reply
	}{
		{"set=1\nlisten_port=51990\n\n", RefusalSet, true},
		{large.String(), RefusalSet, true},
		{"get=1\n\n", RefusalGet, true},
		{"", RefusalGet, false},
		{"se", RefusalGet, false},
		{"set=2\n\n", RefusalGet, true},
	} {
		c := sockettest.Dial(t, ln.Addr().String())
		wrote := make(chan error, 1)
		go func() { _, err := io.WriteString(c, tc.sent); wrote <- err }()
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		s.SetReadDeadline(time.Now().Add(time.Second))
		Refuse(s)
		s.Close()
		if err := <-wrote; err != nil {
			t.Errorf("request of %d bytes: the client's write: %v, want it written whole", len(tc.sent), err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := io.ReadAll(c)
		if string(got) != string(tc.want) || tc.whole && err != nil {
			t.Errorf("request of %d bytes (%.12q...) refused: got %q, %v; want %q and EOF", len(tc.sent), tc.sent, got, err, tc.want)
		}
	}
}
