//go:build linux

package compatgw

import (
	"errors"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/dataplane/afxdp"
)

// TestStartConfigErrors: a configuration that cannot work is refused with an
// error that says what is missing, before anything is opened.
func TestStartConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no name", Config{WAN: "a", LAN: "b", ListenPort: 1}, "compatgw: Name is required"},
		{"no LAN", Config{Name: "x", WAN: "a", ListenPort: 1}, "compatgw: WAN and LAN are required"},
		{"no port", Config{Name: "x", WAN: "a", LAN: "b"}, "compatgw: ListenPort is required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Start(tt.cfg)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				if g != nil {
					g.Close()
				}
				t.Errorf("Start(%+v) = %v, want %q", tt.cfg, err, tt.want)
			}
		})
	}
}

// TestStartNoSuchInterface: an interface that does not exist is named, and
// the error wraps afxdp.ErrNoSuchInterface.
func TestStartNoSuchInterface(t *testing.T) {
	_, err := Start(Config{Name: "wgpnosuch", WAN: "nosuch0", LAN: "nosuch1", ListenPort: 51820})
	if !errors.Is(err, afxdp.ErrNoSuchInterface) || !strings.Contains(err.Error(), `"nosuch0"`) {
		t.Errorf("Start(WAN nosuch0) = %v, want an error naming nosuch0 that wraps afxdp.ErrNoSuchInterface", err)
	}
}
