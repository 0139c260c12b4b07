package uapiserve

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

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
		br := bufio.NewReader(r)
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

// TestServePipelined: a client that writes several operations before
// reading (a set, a set stopped by an error halfway, a get's blank-line
// check by the next set) has each answered, in order, though set reads
// ahead as wireguard-go's IpcSetOperation does (a bufio.Scanner over its
// reader): set sees its own operation's lines only, and what an
// operation stopped at an error left is skipped, not taken for the next.
func TestServePipelined(t *testing.T) {
	client, server := net.Pipe()
	var bodies []string
	set := func(r io.Reader) error {
		sc := bufio.NewScanner(r) // reads ahead, as IpcSetOperation
		var b strings.Builder
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				break
			}
			if line == "fail=1" {
				bodies = append(bodies, b.String())
				return &coded{-22}
			}
			b.WriteString(line + "\n")
		}
		bodies = append(bodies, b.String())
		return sc.Err()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Serve(server, nil, set, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	go fmt.Fprint(client, "set=1\nlisten_port=1\n\nset=1\nfail=1\nlisten_port=2\n\nset=1\nlisten_port=3\nfwmark=4\n\n")
	r := bufio.NewReader(client)
	for i, want := range []string{"errno=0\n", "errno=-22\n", "errno=0\n"} {
		client.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := r.ReadString('\n')
		if err != nil || line != want {
			t.Fatalf("operation %d of 3 written at once: reply %q (%v), want %q", i, line, err, want)
		}
		if blank, _ := r.ReadString('\n'); blank != "\n" {
			t.Fatalf("operation %d: no blank line after the errno line: %q", i, blank)
		}
	}
	client.Close()
	<-done
	want := []string{"listen_port=1\n", "", "listen_port=3\nfwmark=4\n"}
	if !slices.Equal(bodies, want) {
		t.Errorf("set bodies %q, want %q", bodies, want)
	}
}
