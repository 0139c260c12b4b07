//go:build linux

package main

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/config"
)

// TestUpRefusesExistingTUN: where the gateway makes a TUN of its name
// (fast path with an Address: the exception TUN; compat-mqtun's, which
// is multi-queue), a persistent TUN of that name someone made (`ip tuntap
// add`, of the queue kind the mode opens, which Linux's TUNSETIFF
// attaches to) is refused by `wgpio check -system` and `wgpio up`, named,
// with what it is and the fixes (ip link del, -name), and left as it was;
// so is a TUN another program holds open. Before, check said ok and the
// gateway took the TUN over silently, leaving it after a clean stop with
// the gateway's address, the allowed IPs' routes and its MTU, as wg-quick
// would not ("`wg0' already exists"). The gateway's own TUN is not
// persistent: after a SIGKILL it is gone, and the next start is not
// refused.
func TestUpRefusesExistingTUN(t *testing.T) {
	for _, c := range []struct {
		mode  config.Mode
		extra []string // ip tuntap add's flags for the mode's queue kind
	}{{config.ModeFastPath, nil}, {config.ModeCompatMQTUN, []string{"multi_queue"}}} {
		t.Run(string(c.mode), func(t *testing.T) {
			s := newSite(t, func(f *config.File) { f.WGPIO.Mode = c.mode })
			if len(s.file.Interface.Addresses) == 0 {
				t.Fatal("the site's file has no Address: the fast path would make no TUN")
			}
			if err := s.GwA.Forwarding(); err != nil {
				t.Fatal(err)
			}
			// What ip(8) shows of the TUN: the refusal leaves it so.
			show := func() string {
				t.Helper()
				var b strings.Builder
				for _, args := range [][]string{{"-d", "addr", "show", "dev", s.GwName}, {"route", "show", "dev", s.GwName}, {"-6", "route", "show", "dev", s.GwName}} {
					out, err := s.GwA.Run("ip", args...)
					if err != nil {
						t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
					}
					b.WriteString(out)
				}
				return b.String()
			}
			refused := func(what string, want ...string) {
				t.Helper()
				before := show()
				for _, args := range [][]string{{"check", "-system", "-c", s.conf}, {"up", "-c", s.conf}} {
					// A refusal comes at once; an up that started on
					// the TUN is stopped cleanly after 10 s, and what it
					// left is compared below.
					g := start(t, s.GwA.Command(wgpioBin, args...))
					select {
					case <-g.done:
					case <-time.After(10 * time.Second):
						t.Errorf("%s: wgpio %s still running after 10 s: it started on the TUN", what, args[0])
						g.cmd.Process.Signal(syscall.SIGTERM)
						<-g.done
					}
					var ee *exec.ExitError
					if !errors.As(g.err, &ee) || ee.ExitCode() != 1 {
						t.Errorf("%s: wgpio %s: %v, want exit status 1\n%s", what, args[0], g.err, g.output())
					}
					for _, w := range want {
						if !strings.Contains(g.output(), w) {
							t.Errorf("%s: wgpio %s output lacks %q:\n%s", what, args[0], w, g.output())
						}
					}
				}
				if after := show(); after != before {
					t.Errorf("%s: changed by the refused start:\nbefore:\n%s\nafter:\n%s", what, before, after)
				}
			}
			head := "wgpio: " + s.conf + ": the gateway " + s.GwName + " makes a TUN named " + s.GwName + ", but "
			if out, err := s.GwA.Run("ip", append([]string{"tuntap", "add", s.GwName, "mode", "tun"}, c.extra...)...); err != nil {
				t.Fatalf("ip tuntap add: %v\n%s", err, out)
			}
			refused("a persistent TUN", head+"a persistent TUN of that name is in this network namespace (ip -d link show "+s.GwName+"), made by someone else",
				"remove it (ip link del "+s.GwName+"), or start the gateway under another name with -name")
			if out, err := s.GwA.Run("ip", "link", "del", "dev", s.GwName); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			// A TUN of the mode's kind that a program of this test holds
			// open (not persistent).
			fd := -1
			if err := s.GwA.Do(func() error {
				var err error
				if fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
					return err
				}
				ifr, err := unix.NewIfreq(s.GwName)
				if err != nil {
					return err
				}
				flags := uint16(unix.IFF_TUN | unix.IFF_NO_PI)
				if c.extra != nil {
					flags |= unix.IFF_MULTI_QUEUE
				}
				ifr.SetUint16(flags)
				return unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
			}); err != nil {
				t.Fatalf("open a TUN %s: %v", s.GwName, err)
			}
			refused("a TUN held open", head+"a TUN of that name, which another program holds open, is in this network namespace", "stop that program")
			unix.Close(fd)
			// The gateway's own TUN: gone with a process killed by SIGKILL.
			g := s.up(t)
			s.pingBoth(t)
			if out, err := s.GwA.Run("ip", "-d", "link", "show", "dev", s.GwName); err != nil || !strings.Contains(out, "persist off") {
				t.Errorf("the gateway's TUN: %v\n%s\nwant persist off", err, out)
			}
			g.cmd.Process.Kill()
			<-g.done
			if out, err := s.GwA.Run("ip", "link", "show", "dev", s.GwName); err == nil {
				t.Errorf("the gateway's TUN is still there after SIGKILL:\n%s", out)
			}
			g = s.up(t)
			s.pingBoth(t)
			g.cmd.Process.Signal(syscall.SIGTERM)
			if code := waitExit(t, g, "SIGTERM"); code != 0 {
				t.Errorf("exit status %d after SIGTERM, want 0", code)
			}
			s.checkGone(t)
		})
	}
}
