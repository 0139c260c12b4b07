package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadRereadsAFileChangedWhileRead: a file rewritten in place while
// Load read it (an editor saving as a reload's SIGHUP came) is read
// again, and the whole new file is what Load returns: what was read may
// be a cut file, valid with fewer peers or an AllowedIPs cut short,
// which a reload applied. A file that never stops changing is refused,
// naming it, after loadTries reads.
func TestLoadRereadsAFileChangedWhileRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wg0.conf")
	one := "[Interface]\nPrivateKey = " + priv1 + "\n\n[Peer]\nPublicKey = " + pub2 + "\nAllowedIPs = 10.8.0.2/32\n"
	two := one + "\n[Peer]\nPublicKey = " + pub3 + "\nAllowedIPs = 10.8.0.3/32\n"
	if err := os.WriteFile(path, []byte(one), 0o600); err != nil {
		t.Fatal(err)
	}
	reads := 0
	afterRead = func(p string) {
		if reads++; reads == 1 {
			if err := os.WriteFile(p, []byte(two), 0o600); err != nil {
				t.Error(err)
			}
		}
	}
	defer func() { afterRead = nil }()
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if reads != 2 || len(f.Peers) != 2 {
		t.Errorf("Load read the file %d times and returned %d peers, want 2 reads and the saved file's 2 peers", reads, len(f.Peers))
	}

	reads = 0
	afterRead = func(p string) {
		reads++
		if err := os.WriteFile(p, []byte(strings.Repeat("#\n", reads)+one), 0o600); err != nil {
			t.Error(err)
		}
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path+" changed while it was read, 5 times") || reads != loadTries {
		t.Errorf("a file changing at every read: Load = %v after %d reads, want an error naming it after %d", err, reads, loadTries)
	}
}
