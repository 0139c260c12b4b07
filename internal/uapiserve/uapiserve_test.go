package uapiserve

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"golang.zx2c4.com/wireguard/ipc"
)

type coded struct{ code int64 }

func (c *coded) Error() string    { return "coded" }
func (c *coded) ErrorCode() int64 { return c.code }

func TestErrno(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int64
	}{
		{nil, 0},
		{errors.New("malformed"), ipc.IpcErrorInvalid},
		{&coded{-28}, -28},
		{fmt.Errorf("wrapped: %w", &coded{ipc.IpcErrorIO}), ipc.IpcErrorIO},
	} {
		if got := Errno(c.err); got != c.want {
			t.Errorf("Errno(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// TestServeSet: each set=1 operation's lines go to set, up to and with its
// blank line, and its errno line follows; an unknown operation closes the
// connection.
func TestServeSet(t *testing.T) {
	client, server := net.Pipe()
	var bodies []string
	set := func(r io.Reader) error {
		br := r.(*bufio.Reader)
		var b strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return err
			}
			if line == "\n" {
				break
			}
			b.WriteString(line)
		}
		bodies = append(bodies, b.String())
		if len(bodies) == 2 {
			return &coded{-28}
		}
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Serve(server, nil, set, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	r := bufio.NewReader(client)
	for i, want := range []string{"errno=0\n", "errno=-28\n"} {
		if _, err := fmt.Fprintf(client, "set=1\nlisten_port=%d\n\n", 51820+i); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil || line != want {
			t.Fatalf("set %d: reply %q (%v), want %q", i, line, err, want)
		}
		if blank, _ := r.ReadString('\n'); blank != "\n" {
			t.Fatalf("set %d: no blank line after the errno line: %q", i, blank)
		}
	}
	if _, err := fmt.Fprintf(client, "bogus=1\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadString('\n'); err == nil {
		t.Error("the connection stayed open after an unknown operation")
	}
	<-done
	if len(bodies) != 2 || bodies[0] != "listen_port=51820\n" || bodies[1] != "listen_port=51821\n" {
		t.Errorf("set bodies %q", bodies)
	}
}
