//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/gateway/compatgw"
	"github.com/wgpio/wgpio/gateway/fastgw"
)

// TestStartErrorNamesWAN: a WAN without an address, refused by either
// mode's start, is reported at the file's WAN line (or as the -wan flag
// when the file has none), as the other start-time refusals are.
func TestStartErrorNamesWAN(t *testing.T) {
	errs := map[string]error{
		"fastpath": fmt.Errorf("fastgw: %w", &fastgw.SettingError{Key: "WAN", Err: errors.New("WAN eth0 has no IP address")}),
		"compat":   fmt.Errorf("compatgw: %w", &compatgw.SettingError{Key: "WAN", Err: fmt.Errorf("WAN eth0: %w (ip addr add)", compatgw.ErrNoWANAddress)}),
	}
	for mode, err := range errs {
		f := &config.File{Name: "gw.conf"}
		f.WGPIO.Lines = map[string]int{"WAN": 7}
		got := startError(f, err).Error()
		if !strings.HasPrefix(got, "gw.conf:7:") || !strings.Contains(got, "WAN") || !strings.Contains(got, "eth0") {
			t.Errorf("%s: %q, want it at gw.conf:7 naming WAN and eth0", mode, got)
		}
		f.WGPIO.Lines = nil
		if got := startError(f, err).Error(); !strings.Contains(got, "-wan") {
			t.Errorf("%s without a WAN line: %q, want the -wan flag named", mode, got)
		}
	}
}

// TestStartErrorNamesListenPort: a listen port another socket holds,
// refused by either mode's start (SettingError "ListenPort"), is reported
// at [Interface]'s ListenPort line, or as [Interface] ListenPort when the
// file leaves it to its default, not as a [WGPIO] key.
func TestStartErrorNamesListenPort(t *testing.T) {
	inUse := errors.New("listen udp4 198.18.0.1:51820: bind: address already in use; another socket of this host holds UDP port 51820")
	errs := map[string]error{
		"fastpath": fmt.Errorf("fastgw: %w", &fastgw.SettingError{Key: "ListenPort", Err: inUse}),
		"compat":   &compatgw.SettingError{Key: "ListenPort", Err: inUse},
	}
	for mode, err := range errs {
		f := &config.File{Name: "gw.conf"}
		f.Interface.Lines = map[string]int{"ListenPort": 3}
		f.WGPIO.Lines = map[string]int{"WAN": 7}
		got := startError(f, err).Error()
		if !strings.HasPrefix(got, `gw.conf:3: key "ListenPort"`) || !strings.Contains(got, "port 51820") {
			t.Errorf("%s: %q, want it at gw.conf:3, key ListenPort, naming the port", mode, got)
		}
		f.Interface.Lines = nil
		if got := startError(f, err).Error(); !strings.HasPrefix(got, "gw.conf: [Interface] ListenPort") || strings.Contains(got, "[WGPIO]") {
			t.Errorf("%s without a ListenPort line: %q, want [Interface] ListenPort named", mode, got)
		}
	}
}

// TestStartErrorMemlock: a start refused for RLIMIT_MEMLOCK
// (afxdp.MemlockError, as either mode's start wraps it) says how a user
// of the binary makes the UMEMs smaller, fewer Queues, not afxdp's
// Config.NumFrames, the library's API, which no key or flag sets; it is
// still afxdp.ErrMemlock and the errno, and keeps the limit, the port and
// the other fixes.
func TestStartErrorMemlock(t *testing.T) {
	inner := &afxdp.MemlockError{Limit: "now 8192 KiB, hard limit 8192 KiB",
		Err: fmt.Errorf("eth0: register UMEM of 71303168 bytes: %w", os.NewSyscallError("setsockopt XDP_UMEM_REG", unix.ENOMEM))}
	if !strings.Contains(inner.Error(), "Config.NumFrames") {
		t.Fatalf("afxdp's own error %q, want its advice in its own API's terms (Config.NumFrames)", inner)
	}
	for mode, err := range map[string]error{
		"fastpath": fmt.Errorf("fastgw: WAN: %w", inner),
		"compat":   fmt.Errorf("compatgw: open WAN: %w", inner),
	} {
		got := startError(&config.File{Name: "gw.conf"}, err)
		if !errors.Is(got, afxdp.ErrMemlock) || !errors.Is(got, unix.ENOMEM) {
			t.Errorf("%s: %v is not afxdp.ErrMemlock and ENOMEM", mode, got)
		}
		msg := got.Error()
		if strings.Contains(msg, "NumFrames") {
			t.Errorf("%s: %q names afxdp's Config.NumFrames, which a user of the binary cannot set", mode, msg)
		}
		for _, want := range []string{strings.SplitN(err.Error(), " (", 2)[0], "now 8192 KiB, hard limit 8192 KiB", "LimitMEMLOCK=infinity",
			"run fewer queues, with Queues in [WGPIO] or -queues", "eth0: register UMEM"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q lacks %q", mode, msg, want)
			}
		}
	}
}
