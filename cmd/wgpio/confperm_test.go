//go:build linux

package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestWarnWorldAccessible: `wgpio up` warns, as wg-quick does, of a
// configuration file that every user may read (it holds the private key),
// with the fix; not of one only its owner and group may read (the mode
// dist/wgpio.service asks for). It said nothing of a 0644 file.
func TestWarnWorldAccessible(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		mode os.FileMode
		warn bool
	}{{0o644, true}, {0o604, true}, {0o602, true}, {0o640, false}, {0o600, false}} {
		path := filepath.Join(dir, "wg0.conf")
		if err := os.WriteFile(path, []byte("[Interface]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tt.mode); err != nil {
			t.Fatal(err)
		}
		var logs testenv.LogBuffer
		warnWorldAccessible(slog.New(slog.NewTextHandler(&logs, nil)), path)
		got := logs.String()
		if !tt.warn {
			if got != "" {
				t.Errorf("mode %#o: logged %q, want nothing", tt.mode, got)
			}
			continue
		}
		for _, want := range []string{"world accessible", "private key", "file=" + path, "fix=\"chmod o-rwx " + path + "\""} {
			if !strings.Contains(got, want) {
				t.Errorf("mode %#o: logged %q, want it to contain %q", tt.mode, got, want)
			}
		}
	}
	// A file that is not there: nothing (config.Load reports it).
	var logs testenv.LogBuffer
	warnWorldAccessible(slog.New(slog.NewTextHandler(&logs, nil)), filepath.Join(dir, "missing.conf"))
	if logs.String() != "" {
		t.Errorf("missing file: logged %q, want nothing", logs.String())
	}
}

// TestLockNamesHolder: a second instance refused for a name or an
// interface is told which gateway holds it, and its pid (to stop or
// reload it); it was told only the lock file's path.
func TestLockNamesHolder(t *testing.T) {
	testenv.Root(t)
	first, iface := topo.UniqueName("wgpl"), topo.UniqueName("wgpi")
	release, err := lockInstance(first, []string{iface})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	holder := fmt.Sprintf("another wgpio (gateway %s, pid %d) already runs with ", first, os.Getpid())
	if _, err := lockInstance(first, nil); err == nil || !strings.HasPrefix(err.Error(), holder+"name "+first) {
		t.Errorf("second lock of name %s: %v, want %q…", first, err, holder+"name "+first)
	}
	if _, err := lockInstance(topo.UniqueName("wgpl"), []string{iface}); err == nil || !strings.HasPrefix(err.Error(), holder+"interface "+iface) {
		t.Errorf("second lock of interface %s: %v, want %q…", iface, err, holder+"interface "+iface)
	}
}

// TestConfigUnreadable: a configuration file the gateway's user may not
// read (root's alone, as the README's umask 077 writes it, or in a
// directory closed to that user) is explained, by up, check and strip
// alike: the user, the file's mode and owners, and the chgrp and chmod
// that let the user's group in, as dist/wgpio.service's header installs
// /etc/wgpio and the file. They said only "open ...: permission denied".
func TestConfigUnreadable(t *testing.T) {
	testenv.Root(t)
	testenv.Tool(t, "setpriv", "util-linux")
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// nobody must reach the binary and dir.
	for _, d := range []string{filepath.Dir(wgpioBin), dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	closed := filepath.Join(dir, "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	rootOnly, inClosed := filepath.Join(dir, "wg0.conf"), filepath.Join(closed, "wg0.conf")
	for _, p := range []string{rootOnly, inClosed} {
		if err := os.WriteFile(p, []byte("[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fileHint := fmt.Sprintf("load config: open %s: permission denied (running as user nobody, uid %s, and the file is mode 0600 of root:root: "+
		"let the group %s read it, not every user, chgrp %s %s && chmod 0640 %s, as dist/wgpio.service's header installs it)",
		rootOnly, u.Uid, g.Name, g.Name, rootOnly, rootOnly)
	dirHint := fmt.Sprintf("load config: open %s: permission denied (running as user nobody, uid %s, which may not enter the directory %s: "+
		"let its group in, chgrp %s %s && chmod 0750 %s, as dist/wgpio.service's header installs /etc/wgpio)",
		inClosed, u.Uid, closed, g.Name, closed, closed)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "-c", rootOnly}, fileHint},
		{[]string{"check", "-c", rootOnly}, fileHint},
		{[]string{"strip", rootOnly}, fileHint},
		{[]string{"check", "-c", inClosed}, dirHint},
	} {
		args := append([]string{"--reuid=nobody", "--regid=" + u.Gid, "--clear-groups", "--inh-caps=-all", wgpioBin}, tc.args...)
		out, err := exec.Command("setpriv", args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("wgpio %s as nobody: %v, want exit status 1", strings.Join(tc.args, " "), err)
		}
		want := "wgpio: " + tc.want
		if tc.args[0] == "strip" {
			want = stripFailed + "\n" + want // on stdout, for wg(8) to refuse
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("wgpio %s as nobody:\n got %s\nwant %s", strings.Join(tc.args, " "), got, want)
		}
	}
}

// TestUAPINameTaken: up refuses, before it opens anything, a name whose
// UAPI socket a running WireGuard answers (wireguard-go, another wgpio,
// maybe of another network namespace), naming the socket and -name; a
// socket nothing answers (left by a process killed) is no obstacle. The
// start failed after it had attached XDP, with "unix socket in use".
func TestUAPINameTaken(t *testing.T) {
	testenv.Root(t)
	name := topo.UniqueName("wgun")
	if err := os.MkdirAll(uapiDir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(uapiDir, name+".sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(path)
	err = uapiNameFree(name)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "-name") {
		t.Errorf("a name whose socket answers: %v, want an error naming %s and -name", err, path)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if err := uapiNameFree(name); err != nil {
		t.Errorf("a socket nothing answers: %v, want nil", err)
	}
}

// TestMissingConfigHint: a configuration named as wg-quick names one, by
// its interface (`wgpio up -c wg0` for wg0.conf), is refused with the
// file it most likely meant; it was told only "no such file or
// directory". A name with no such file gets no hint.
func TestMissingConfigHint(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "wg0.conf"), []byte("[Interface]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadConfig(filepath.Join(dir, "wg0"))
	want := "did you mean -c " + filepath.Join(dir, "wg0.conf") + "?"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("loadConfig(%s/wg0) = %v, want the error to say %q", dir, err, want)
	}
	if _, err := loadConfig(filepath.Join(dir, "wg1")); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("loadConfig(%s/wg1), no wg1.conf: %v, want an error without a hint", dir, err)
	}
}
