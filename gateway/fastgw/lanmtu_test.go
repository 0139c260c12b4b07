//go:build linux

package fastgw_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
)

// onMessage is a slog.Handler that runs do, once, when a record with the
// message msg is logged, before the logging call returns.
type onMessage struct {
	msg  string
	do   func()
	done *bool
}

func (h onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h onMessage) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h onMessage) WithGroup(string) slog.Handler            { return h }
func (h onMessage) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg && !*h.done {
		*h.done = true
		h.do()
	}
	return nil
}

// TestLANMTUChangedDuringStart: a LAN MTU lowered after the LAN port is
// opened (where the engine reads it) and before the gateway follows the
// link (a network manager configuring the link while the service starts)
// applies too: a 1400-byte ping with DF from hostB gets "fragmentation
// needed (mtu = 1300)". Before, the watcher compared the link with its own
// read after the change, not with the engine's MTU, and the engine kept
// 1500 until the next change.
func TestLANMTUChangedDuringStart(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{NoFastPath: true})
	fc := s.FastConfig
	changed := false
	fc.Logger = slog.New(onMessage{msg: "ports open", done: &changed, do: func() {
		runOK(t, s.GwA, "ip", "link", "set", "dev", s.LANA, "mtu", "1300")
	}})
	if err := s.GwA.Do(func() (err error) {
		s.Gateway, err = fastgw.Start(fc)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !changed {
		t.Fatal(`no "ports open" logged: the LAN MTU was not changed during the start`)
	}
	ping(t, s.HostB, twosite.HostA4.String(), 0)
	var out string
	waitFor(t, "fragmentation needed with the LAN MTU set during the start", func() bool {
		out, _ = s.HostB.Run("ping", "-c", "1", "-W", "1", "-M", "do", "-s", "1372", twosite.HostA4.String())
		return strings.Contains(out, "mtu = 1300")
	})
}

// TestLANMTURaised: the LAN MTU raised on a running gateway (1300 at
// start, then 1500) takes effect at once: host B's 1400-byte ping with DF
// reaches host A whole and is answered. Before, the engine held decrypted
// packets to the new MTU while the LAN port's TX bound stayed the MTU of
// start: the 1414-byte frames were dropped by the port as too_long, and
// host B got neither an answer nor "fragmentation needed".
func TestLANMTURaised(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{NoFastPath: true})
	runOK(t, s.GwA, "ip", "link", "set", "dev", s.LANA, "mtu", "1300")
	if err := s.GwA.Do(func() (err error) {
		s.Gateway, err = fastgw.Start(s.FastConfig)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	runOK(t, s.GwA, "ip", "link", "set", "dev", s.LANA, "mtu", "1500")
	_, lan := s.Gateway.Ports()
	waitFor(t, "the LAN port at MTU 1500", func() bool { return lan.MTU() == 1500 })
	ping(t, s.HostB, twosite.HostA4.String(), 1372)
}
