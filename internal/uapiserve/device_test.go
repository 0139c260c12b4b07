package uapiserve

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/ipc"

	"github.com/wgpio/wgpio/internal/testing/downdev"
)

// serveDevice serves one end of a net.Pipe for a stock wireguard-go
// device that stays down, with its own IpcSetOperation as set, and
// returns the other end and a channel closed when Serve returned.
func serveDevice(t *testing.T) (client net.Conn, done chan struct{}) {
	t.Helper()
	dev := downdev.New()
	t.Cleanup(dev.Close)
	client, server := net.Pipe()
	done = make(chan struct{})
	go func() {
		defer close(done)
		Serve(server, dev, func(r io.Reader) error { return dev.IpcSetOperation(r) }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() { client.Close(); <-done })
	return client, done
}

// Two private keys, already clamped (X25519), as IpcGet prints them.
var (
	keyA = strings.Repeat("08", 31) + "48"
	keyB = strings.Repeat("10", 31) + "50"
)

// readReply reads one reply (up to its errno line and blank line) and
// returns the private key line's value, if any, and the errno line.
func readReply(t *testing.T, r *bufio.Reader) (priv, errno string) {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading a reply: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		if k, ok := strings.CutPrefix(line, "private_key="); ok {
			priv = k
		}
		if e, ok := strings.CutPrefix(line, "errno="); ok {
			errno = e
			if blank, err := r.ReadString('\n'); err != nil || blank != "\n" {
				t.Fatalf("no blank line after errno=%s: %q (%v)", e, blank, err)
			}
			return priv, errno
		}
	}
}

// TestServeDevicePipelined: a real device's IpcSetOperation (whose
// bufio.Scanner reads ahead) behind Serve, with every operation written
// before any reply is read: gets between sets see each set's effect; a
// set that fails on a line has the lines after it skipped (not applied,
// not taken for the next operation); a line longer than the Scanner takes
// (64 KiB) fails its set with EIO and the operation is skipped to its
// blank line.
func TestServeDevicePipelined(t *testing.T) {
	client, _ := serveDevice(t)
	long := strings.Repeat("x", 200<<10)
	ops := []struct{ req, priv, errno string }{
		{"set=1\nprivate_key=" + keyA + "\n\n", "", "0"},
		{"get=1\n\n", keyA, "0"},
		{"set=1\nprivate_key=zz\nprivate_key=" + keyB + "\n\n", "", fmt.Sprint(ipc.IpcErrorInvalid)},
		{"get=1\n\n", keyA, "0"},
		{"set=1\nprivate_key=" + long + "\nprivate_key=" + keyB + "\n\n", "", fmt.Sprint(ipc.IpcErrorIO)},
		{"get=1\n\n", keyA, "0"},
		{"set=1\n\n", "", "0"}, // an empty set
		{"set=1\nprivate_key=" + keyB + "\n\n", "", "0"},
		{"get=1\n\n", keyB, "0"},
	}
	var all strings.Builder
	for _, op := range ops {
		all.WriteString(op.req)
	}
	go client.Write([]byte(all.String()))
	r := bufio.NewReader(client)
	for i, op := range ops {
		client.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang fails, not a timing
		priv, errno := readReply(t, r)
		if errno != op.errno || priv != op.priv {
			t.Fatalf("operation %d (%.40q): private_key %q, errno %s; want %q, %s", i, op.req, priv, errno, op.priv, op.errno)
		}
	}
}

// TestServeSetEOF: a set whose client closes before the operation's blank
// line (mid-line, or after a whole line) ends the connection: Serve
// returns, and nothing after is answered.
func TestServeSetEOF(t *testing.T) {
	for _, req := range []string{
		"set=1\nprivate_key=" + keyA + "\n",
		"set=1\nprivate_key=" + keyA[:10],
		"set=1\n",
		"get=1\n",
		"set=1\nprivate_key=" + keyA + "\n\nget=1\n",
	} {
		client, done := serveDevice(t)
		go func() {
			io.Copy(io.Discard, client) // the replies, if any
		}()
		if _, err := client.Write([]byte(req)); err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		client.Close()
		<-done
	}
}

// TestServeLongOperationLine: an operation line that never ends (a client
// sending garbage with no newline) closes the connection once it exceeds
// any operation's length, instead of growing the server's buffer without
// bound: the client's write fails before all of it was taken.
func TestServeLongOperationLine(t *testing.T) {
	client, done := serveDevice(t)
	n, err := client.Write(make([]byte, 1<<20))
	if err == nil {
		t.Fatalf("a %d-byte operation line without a newline was all read", n)
	}
	<-done
}

// TestServeUnknownOperationLogBounded: an unknown operation of 4 KiB is
// logged by its first bytes and its length, not in full.
func TestServeUnknownOperationLogBounded(t *testing.T) {
	dev := downdev.New()
	t.Cleanup(dev.Close)
	var logs bytes.Buffer
	client, server := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Serve(server, dev, func(r io.Reader) error { return dev.IpcSetOperation(r) }, slog.New(slog.NewTextHandler(&logs, nil)))
	}()
	defer client.Close()
	if _, err := io.WriteString(client, strings.Repeat("x", 4000)+"\n"); err != nil {
		t.Fatal(err)
	}
	<-done
	if l := logs.String(); len(l) > 512 || !strings.Contains(l, "bytes=4001") {
		t.Errorf("log of a 4 KiB unknown operation: %d bytes, want its start and length: %.300q", len(l), l)
	}
}

// TestServeSetCutLineNotApplied: a set whose client goes away in the
// middle of a line applies the whole lines before it and nothing of the
// cut one. wireguard-go's scanner applies a last line without its newline:
// a client killed after "listen_port=518" of 51820 moved the gateway to
// port 518, one cut within "allowed_ip=198.19.9.0/24" gave the peer a /2.
func TestServeSetCutLineNotApplied(t *testing.T) {
	dev := downdev.New()
	defer dev.Close()
	client, server := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Serve(server, dev, func(r io.Reader) error { return dev.IpcSetOperation(r) }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	go io.Copy(io.Discard, client)
	peer := strings.Repeat("20", 32)
	if _, err := io.WriteString(client, "set=1\nprivate_key="+keyA+"\nlisten_port=518"); err != nil {
		t.Fatal(err)
	}
	client.Close()
	<-done
	client, server = net.Pipe()
	done = make(chan struct{})
	go func() {
		defer close(done)
		Serve(server, dev, func(r io.Reader) error { return dev.IpcSetOperation(r) }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	go io.Copy(io.Discard, client)
	if _, err := io.WriteString(client, "set=1\npublic_key="+peer+"\nallowed_ip=198.19.9.0/2"); err != nil {
		t.Fatal(err)
	}
	client.Close()
	<-done
	got, err := dev.IpcGet()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "private_key="+keyA) || !strings.Contains(got, "public_key="+peer) {
		t.Errorf("the whole lines before the cut are not applied:\n%s", got)
	}
	if strings.Contains(got, "listen_port=518") || strings.Contains(got, "allowed_ip=") {
		t.Errorf("a cut-off line was applied:\n%s", got)
	}
}

// TestServeSetCutAnswered: a client that shuts its write side down in
// the middle of a set line still reads a non-zero errno (the fast path's
// socket answers so too), and nothing of the line is applied. Before,
// the connection closed with no answer.
func TestServeSetCutAnswered(t *testing.T) {
	dev := downdev.New()
	defer dev.Close()
	ln, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		Serve(c, dev, func(r io.Reader) error { return dev.IpcSetOperation(r) }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	c, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "set=1\nlisten_port=518")
	c.(*net.UnixConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, errno := readReply(t, bufio.NewReader(c))
	if errno == "0" || errno == "" {
		t.Errorf("errno=%q, want an error", errno)
	}
	<-done
	if got, _ := dev.IpcGet(); strings.Contains(got, "listen_port=518") {
		t.Errorf("the cut line was applied:\n%s", got)
	}
}
