//go:build linux

package kwg

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// fakeChannel serves the guest side of the ttyS1 command channel as
// guest/init does: for a line "ID CMD" it writes "KWG_BEGIN ID", the
// reply's lines, then "KWG_END ID RC". replies maps CMD to output and rc.
func fakeChannel(t *testing.T, dir string, replies map[string]struct {
	out string
	rc  int
}) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(dir, "ctl.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			sc := bufio.NewScanner(c)
			if sc.Scan() {
				id, cmd, _ := strings.Cut(sc.Text(), " ")
				r := replies[cmd]
				// Output from an earlier command and a CR, as a serial
				// line may carry, must be ignored.
				fmt.Fprintf(c, "stale line\r\nKWG_BEGIN %s\r\n%sKWG_END %s %d\r\n", id, r.out, id, r.rc)
			}
			c.Close()
		}
	}()
}

func TestCtl(t *testing.T) {
	dir := t.TempDir()
	pub := PublicKey(NewPrivateKey())
	dump := "privkey\tpubkey\t51820\toff\n" +
		Base64(pub) + "\t(none)\t198.18.50.1:51820\t198.19.50.1/32,198.19.60.0/24\t1796029884\t1132852\t1121012\toff\n"
	fakeChannel(t, dir, map[string]struct {
		out string
		rc  int
	}{
		"echo hi":          {"hi\n", 0},
		"false":            {"", 1},
		"wg show wg0 dump": {dump, 0},
	})
	g := &Guest{dir: dir}

	if out, err := g.Ctl(5e9, "echo hi"); err != nil || out != "hi\n" {
		t.Errorf(`Ctl("echo hi") = %q, %v, want "hi\n", nil`, out, err)
	}
	if _, err := g.Ctl(5e9, "false"); err == nil || !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf(`Ctl("false") error = %v, want exit status 1`, err)
	}
	if _, err := g.Ctl(5e9, "a\nb"); err == nil {
		t.Errorf(`Ctl("a\nb") error = nil, want an error (a newline would be two commands)`)
	}
	d, err := g.Dump(pub)
	want := DumpPeer{PublicKey: Base64(pub), Endpoint: "198.18.50.1:51820", AllowedIPs: "198.19.50.1/32,198.19.60.0/24",
		LastHandshake: 1796029884, RxBytes: 1132852, TxBytes: 1121012, Line: strings.Split(dump, "\n")[1]}
	if err != nil || d != want {
		t.Errorf("Dump = %+v, %v, want %+v", d, err, want)
	}
	if _, err := g.Dump(PublicKey(NewPrivateKey())); err == nil {
		t.Errorf("Dump(unknown key) error = nil, want an error")
	}
}

// TestPublicKey checks PublicKey and Base64 against wg(8): the public keys
// are `wg pubkey` of the two fixed test keys of shared/tools/kwg.
func TestPublicKey(t *testing.T) {
	for _, tc := range []struct{ priv, pub string }{
		{"eOyASCEo94Plo7bBAKfNoLGyoPNbhwfBT8V3TRbIq1U=", "TmYOMgtfvLoMrm9MbZ7kedKbg9RX+BPg0zzpBeiLaUg="},
		{"IP0ZCjAxx6jSl2I7u6WIHOi2ZjXa4SEPOhJKzOTo72c=", "lwmZESfrdAxZDe3eGKbED7gVeZdBqy3dn1UOW4upRzk="},
	} {
		b, err := base64.StdEncoding.DecodeString(tc.priv)
		if err != nil || len(b) != 32 {
			t.Fatalf("bad test key %q", tc.priv)
		}
		if got := Base64(PublicKey(Key(b))); got != tc.pub {
			t.Errorf("PublicKey(%s) = %s, want %s", tc.priv, got, tc.pub)
		}
	}
}
