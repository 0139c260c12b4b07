package gateway

import (
	"strings"
	"testing"
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
