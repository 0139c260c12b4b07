//go:build linux

package main

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/gateway/fastgw"
)

// TestReadmeConfigDefaults: the comments of README's example file say
// the defaults the gateway takes for a key left out: ListenPort's in
// fast-path mode, fastgw.DefaultListenPort (not wg(8)'s random port), and
// that compat mode requires one (checkFile refuses a file without); and
// Queues' in fast-path mode, one per RX queue of the WAN or the LAN,
// whichever has fewer (fastgw's queueCount, config/doc.go). README said
// nothing of ListenPort's default, and "all of them" of Queues.
func TestReadmeConfigDefaults(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n### The configuration file\n")
	if !ok {
		t.Fatal(`README has no section "### The configuration file"`)
	}
	_, block, _ := strings.Cut(sec, "```ini\n")
	if block, _, ok = strings.Cut(block, "```"); !ok {
		t.Fatal("README's configuration section has no ini block")
	}
	// A key's comment: on its line, and on the lines below that hold a
	// comment alone, indented.
	comment := func(key string) string {
		var out []string
		in := false
		for _, l := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(strings.TrimLeft(l, "# "), key+" "):
				in = true
				if _, c, ok := strings.Cut(strings.TrimPrefix(l, "#"), "#"); ok {
					out = append(out, strings.TrimSpace(c))
				}
			case in && strings.HasPrefix(l, " ") && strings.HasPrefix(strings.TrimSpace(l), "#"):
				out = append(out, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#")))
			default:
				in = false
			}
		}
		return strings.Join(out, " ")
	}
	for key, wants := range map[string][]string{
		"ListenPort": {"left out: " + strconv.Itoa(fastgw.DefaultListenPort) + " in fastpath mode", "random", "Mode = compat requires it"},
		"Queues":     {"left out: one per RX queue of the WAN or the LAN, whichever has fewer", "compat-mqtun: one TUN queue"},
	} {
		c := comment(key)
		for _, want := range wants {
			if !strings.Contains(c, want) {
				t.Errorf("README's example file: %s's comment %q lacks %q", key, c, want)
			}
		}
		if strings.Contains(c, "all of them") {
			t.Errorf("README's example file: %s's comment %q says \"all of them\"", key, c)
		}
	}
}
