package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
)

// laterDP is a fakeDP that leaves a part of every change to later
// (laterDataplane, as fastgw does for a large change): it records whether
// the device's lock was free when later ran, and later returns err.
type laterDP struct {
	*fakeDP
	d      *Device
	err    error
	calls  int // of later
	locked int // of them with d.mu held
}

func (l *laterDP) UpdatePeersLater(c fastpath.PeerChange) (func() error, error) {
	if err := l.fakeDP.UpdatePeers(c); err != nil {
		return nil, err
	}
	return func() error {
		l.calls++
		if l.d.mu.TryLock() {
			l.d.mu.Unlock()
		} else {
			l.locked++
		}
		return l.err
	}, nil
}

// TestPublishLater: the part of a change a dataplane leaves to later
// (laterDataplane) is done once each change, after the device's lock is
// released, by every call that changes peers and waits for its change (the
// UAPI socket's set, IpcSet, IpcUpdate, AddPeers), and its error is theirs
// (errno ENOSPC for the UAPI). RemovePeer does it under the lock (it
// waits for nothing). Before, fastgw's part (the configuration's tables,
// the LAN map's inserts) was done under the lock: 0.3-0.5 s at 100,000
// peers that handshakes and `wg show` waited.
func TestPublishLater(t *testing.T) {
	k := func(i byte) noise.PublicKey { var k noise.PublicKey; k[0], k[31] = i, 0x77; return k }
	set := func(i byte) string {
		return fmt.Sprintf("public_key=%s\nallowed_ip=198.19.%d.0/24\n", k(i).Hex(), i)
	}
	uapi := func(d *Device, body string) error {
		client, server := net.Pipe()
		defer client.Close()
		go d.ServeUAPI(server)
		go io.WriteString(client, "set=1\n"+body+"\n")
		reply, err := bufio.NewReader(client).ReadString('\n')
		if err != nil {
			return err
		}
		if reply != "errno=0\n" {
			return errors.New(strings.TrimSpace(reply))
		}
		return nil
	}
	for _, tc := range []struct {
		name   string
		change func(d *Device, i byte) error
		locked bool // later runs under d.mu
	}{
		{name: "UAPI socket", change: func(d *Device, i byte) error { return uapi(d, set(i)) }},
		{name: "IpcSet", change: func(d *Device, i byte) error { return d.IpcSet(strings.NewReader(set(i))) }},
		{name: "IpcUpdate", change: func(d *Device, i byte) error {
			return d.IpcUpdate(func(string) (string, error) { return set(i), nil })
		}},
		{name: "AddPeers", change: func(d *Device, i byte) error { return d.AddPeers([]PeerConfig{{PublicKey: k(i)}}) }},
		{name: "RemovePeer", change: func(d *Device, i byte) error {
			if err := d.AddPeers([]PeerConfig{{PublicKey: k(i)}}); err != nil {
				return err
			}
			d.RemovePeer(k(i))
			return nil
		}, locked: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &laterDP{fakeDP: newFakeDP(t)}
			d := newPlainDevice(t, l.fakeDP)
			d.dp = l // the device's dataplane with the later part
			l.d = d
			if err := tc.change(d, 1); err != nil {
				t.Fatalf("change: %v", err)
			}
			wantLocked := 0
			if tc.locked {
				wantLocked = l.calls - 1 // the AddPeers before it waited
			}
			if l.calls == 0 || l.locked != wantLocked {
				t.Errorf("later called %d times, %d of them under the device's lock; want some, %d", l.calls, l.locked, wantLocked)
			}
			if tc.locked {
				return
			}
			calls := l.calls
			l.err = fmt.Errorf("the LAN map is full: %w", syscall.ENOSPC)
			err := tc.change(d, 2)
			if l.calls != calls+1 {
				t.Errorf("later called %d times for one change, want once", l.calls-calls)
			}
			var ue *UAPIError
			switch {
			case tc.name == "UAPI socket":
				if err == nil || err.Error() != fmt.Sprintf("errno=%d", -int(syscall.ENOSPC)) {
					t.Errorf("set with later's ENOSPC: reply %v, want errno=%d", err, -int(syscall.ENOSPC))
				}
			case tc.name == "AddPeers":
				if !errors.Is(err, syscall.ENOSPC) {
					t.Errorf("AddPeers with later's ENOSPC = %v, want it", err)
				}
			case !errors.As(err, &ue) || ue.Code != -int64(syscall.ENOSPC):
				t.Errorf("%s with later's ENOSPC = %v, want a UAPIError of errno %d", tc.name, err, -int(syscall.ENOSPC))
			}
		})
	}
}
