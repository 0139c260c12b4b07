package gateway

import (
	"strings"
	"testing"
	"time"
)

// TestNewRefusesSocketName: a name that cannot name an interface is
// refused before anything starts: its socket, /var/run/wireguard/<Name>.sock,
// went wherever the name's '/'s led ("../../tmp/x": /tmp/x.sock).
func TestNewRefusesSocketName(t *testing.T) {
	for _, name := range []string{"../../tmp/x", "a/b", "sixteen-bytes-xx", "wg%d", "w g"} {
		if _, err := New(Options{Name: name, Dataplane: newFakeDP(t)}); err == nil || !strings.Contains(err.Error(), "cannot name a UAPI socket") {
			t.Errorf("New(Name %q) = %v, want a refusal", name, err)
		}
	}
}

// TestNewRefusesNegativeOptions: a negative count or interval, a caller's
// mistake, is refused by name; it was taken as the default without a word.
func TestNewRefusesNegativeOptions(t *testing.T) {
	for name, o := range map[string]Options{
		"HandshakeWorkers": {HandshakeWorkers: -1},
		"HandshakeBacklog": {HandshakeBacklog: -5},
		"TickInterval":     {TickInterval: -time.Second},
	} {
		o.Dataplane = newFakeDP(t)
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("New(%s negative) = %v, want a refusal naming it", name, err)
		}
	}
}
