//go:build linux

package main

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
)

// failingListener is a listener whose first Accepts fail with errs in
// turn, then are ln's.
type failingListener struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// TestMetricsOutlivesAcceptErrors: /metrics answers after accepts that
// failed with errors net/http does not take for temporary (ENOBUFS,
// ENOMEM, EPROTO), each logged once as a warning. Before, its server
// closed the socket at the first of them and ended, saying so only on
// stdout: every later scrape was refused until a restart.
func TestMetricsOutlivesAcceptErrors(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOBUFS, syscall.ENOMEM, syscall.EPROTO} {
		inner, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln := &failingListener{Listener: inner, errs: []error{
			&net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)},
		}}
		t.Cleanup(func() { ln.Close() })
		var logs testenv.LogBuffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		if err := serveMetrics(log, ln, "wg0", func() GatewayStats { return GatewayStats{} }, nil, 0, newReloadState(time.Now())); err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Timeout: 20 * time.Second}
		resp, err := client.Get("http://" + inner.Addr().String() + "/metrics")
		if err != nil {
			t.Fatalf("%v: scrape after the failed accept: %v", errno, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "wgpio_") {
			t.Errorf("%v: scrape after the failed accept: %s, %d bytes; want 200 with the metrics", errno, resp.Status, len(body))
		}
		if l := logs.String(); !strings.Contains(l, "metrics socket: accept failed; trying again") || !strings.Contains(l, errno.Error()) {
			t.Errorf("%v: the failed accept not logged as a warning:\n%s", errno, l)
		}
	}
}

// TestMetricsConnectionsBounded: the metrics endpoint holds at most
// metricsMaxConns connections at once: with that many open and silent, a
// scrape waits (in the listen backlog) instead of being served, and is
// served once they go. Before, every connection was taken, each with a
// goroutine and a descriptor for up to metricsTimeout: 800 half-open
// connections were 800 goroutines.
func TestMetricsConnectionsBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if err := serveMetrics(slog.New(slog.DiscardHandler), ln, "wg0", func() GatewayStats { return GatewayStats{} }, nil, 0, newReloadState(time.Now())); err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	var idle []net.Conn
	for range metricsMaxConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	scrape := func(timeout time.Duration) error {
		client := &http.Client{Timeout: timeout}
		resp, err := client.Get("http://" + addr + "/metrics")
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	}
	if err := scrape(time.Second); err == nil {
		t.Errorf("a scrape beside %d silent connections was served: the connections are not bounded", metricsMaxConns)
	}
	for _, c := range idle {
		c.Close()
	}
	if err := scrape(20 * time.Second); err != nil {
		t.Errorf("a scrape once the silent connections went: %v", err)
	}
}
