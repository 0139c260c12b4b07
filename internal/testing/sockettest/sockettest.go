// Package sockettest holds what the tests of wgpio's unix sockets (the
// UAPI socket in every mode, the capture socket, package acceptloop's
// server) share: a connection closed with the test, and telling a
// connection the server closed (or refused, with a reply) from one it
// still holds.
package sockettest

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// Dial connects to the unix socket at path, failing the test if it
// cannot; the connection is closed when the test ends.
func Dial(t testing.TB, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ClosedWithin reports whether the server closes c within d: a read ends
// in EOF, or in a reset (closed with bytes of ours unread). It consumes
// what c reads, and leaves c's read deadline set.
func ClosedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	return err == io.EOF || errors.Is(err, syscall.ECONNRESET)
}

// RefusedWithin reports whether the server refuses c within d: it writes
// reply and closes c (EOF, or a reset) with nothing else. It consumes
// what c reads, and leaves c's read deadline set; got is what it read.
func RefusedWithin(c net.Conn, d time.Duration, reply []byte) (got []byte, ok bool) {
	c.SetReadDeadline(time.Now().Add(d))
	got, err := io.ReadAll(c)
	closed := err == nil || errors.Is(err, syscall.ECONNRESET) // ReadAll: EOF is nil
	return got, closed && string(got) == string(reply)
}
