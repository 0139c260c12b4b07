//go:build linux

package afxdp

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/wgpio/wgpio/internal/topo"
)

// fakeJournal is an OffloadJournal that keeps the changes in memory.
type fakeJournal struct {
	mu       sync.Mutex
	recorded []OffloadChange
	forgot   []OffloadChange
	fail     error // Record's error
}

func (j *fakeJournal) Record(c OffloadChange) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.fail != nil {
		return j.fail
	}
	j.recorded = append(j.recorded, c)
	return nil
}

func (j *fakeJournal) Forget(c OffloadChange) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.forgot = append(j.forgot, c)
}

// rxVLANOn reports which of rxVLANFeatures dev has on in ns.
func rxVLANOn(t *testing.T, ns *topo.NS, dev string) []string {
	t.Helper()
	fs, err := ns.Features(dev)
	if err != nil {
		t.Fatal(err)
	}
	var on []string
	for _, f := range rxVLANFeatures {
		if fs[f] {
			on = append(on, f)
		}
	}
	return on
}

// nsInode is the inode of ns's network namespace, as threadNetns reads it.
func nsInode(t *testing.T, ns *topo.NS) uint64 {
	t.Helper()
	out, err := ns.Run("stat", "-L", "-c", "%i", "/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	ino, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return ino
}

// TestOffloadJournal: Open records the change of RX VLAN offload before
// it makes it (the device's namespace, index, name and MAC, and the
// features), Close undoes it on the device of that index after it was
// renamed (it targeted the old name, which no device had: the offload
// stayed off) and forgets it; a journal that fails fails Open with the
// device unchanged.
func TestOffloadJournal(t *testing.T) {
	p := newVethPair(t, 1)
	want := rxVLANOn(t, p.b, p.v.B)
	if len(want) == 0 {
		t.Fatalf("%s has RX VLAN offload off before the test; want veth's default, %v on", p.v.B, rxVLANFeatures)
	}
	l, err := p.b.Handle().LinkByName(p.v.B)
	if err != nil {
		t.Fatal(err)
	}
	j := &fakeJournal{}
	port := openIn(t, p.b, p.v.B, Config{Journal: j})
	wantChange := OffloadChange{Netns: nsInode(t, p.b), Ifindex: l.Attrs().Index, Name: p.v.B, MAC: p.macB, Off: want}
	if diff := cmp.Diff([]OffloadChange{wantChange}, j.recorded); diff != "" {
		t.Errorf("recorded (-want +got):\n%s", diff)
	}
	if on := rxVLANOn(t, p.b, p.v.B); len(on) > 0 {
		t.Errorf("%v on while the port is open", on)
	}

	renamed := p.v.B + "r"
	h := p.b.Handle()
	if err := h.LinkSetDown(l); err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetName(l, renamed); err != nil {
		t.Fatal(err)
	}
	if err := port.Close(); err != nil {
		t.Errorf("Close after a rename: %v", err)
	}
	if got := rxVLANOn(t, p.b, renamed); !slices.Equal(got, want) {
		t.Fatalf("after Close, %s (renamed from %s) has %v on, want %v", renamed, p.v.B, got, want)
	}
	if diff := cmp.Diff([]OffloadChange{wantChange}, j.forgot); diff != "" {
		t.Errorf("forgotten (-want +got):\n%s", diff)
	}

	bad := &fakeJournal{fail: errors.New("disk full")}
	err = p.b.Do(func() error {
		port, err := Open(renamed, Config{Journal: bad})
		if err == nil {
			port.Close()
		}
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Open with a journal that fails: %v, want its error", err)
	}
	if got := rxVLANOn(t, p.b, renamed); !slices.Equal(got, want) {
		t.Errorf("after an Open that could not record, %v on, want %v", got, want)
	}
}

// TestRestoreOffload: RestoreOffload turns on the features recorded on the
// device of the index recorded, renamed or not, and leaves alone an index
// that another device has now, one that is gone, and another namespace's.
func TestRestoreOffload(t *testing.T) {
	p := newVethPair(t, 1)
	want := rxVLANOn(t, p.b, p.v.B)
	if len(want) == 0 {
		t.Fatalf("%s has RX VLAN offload off before the test; want veth's default, %v on", p.v.B, rxVLANFeatures)
	}
	l, err := p.b.Handle().LinkByName(p.v.B)
	if err != nil {
		t.Fatal(err)
	}
	off := func() {
		t.Helper()
		ch := make(map[string]bool)
		for _, f := range want {
			ch[f] = false
		}
		if err := p.b.SetFeatures(p.v.B, ch); err != nil {
			t.Fatal(err)
		}
	}
	restore := func(c OffloadChange) error {
		return p.b.Do(func() error { return RestoreOffload(c) })
	}
	rec := OffloadChange{Netns: nsInode(t, p.b), Ifindex: l.Attrs().Index, Name: p.v.B, MAC: p.macB, Off: want}
	for _, c := range []struct {
		name    string
		change  func(c *OffloadChange)
		wantErr error // nil: restored
	}{
		{"same", func(*OffloadChange) {}, nil},
		{"renamed", func(c *OffloadChange) { c.Name = "wgpio-old0" }, nil},
		{"no MAC recorded", func(c *OffloadChange) { c.MAC = nil }, nil},
		{"other device", func(c *OffloadChange) { c.Name, c.MAC = "wgpio-old0", p.macA }, ErrOtherDevice},
		{"gone", func(c *OffloadChange) { c.Ifindex = 1 << 30 }, ErrNoSuchInterface},
		{"other namespace", func(c *OffloadChange) { c.Netns++ }, nil},
		// A record edited or corrupted: not a change Open makes.
		{"other features", func(c *OffloadChange) { c.Off = append(slices.Clone(c.Off), "rx-gro-hw") }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			off()
			ch := rec
			c.change(&ch)
			err := restore(ch)
			got := rxVLANOn(t, p.b, p.v.B)
			switch {
			case c.name == "other namespace", c.name == "other features":
				if err == nil || len(got) > 0 {
					t.Errorf("RestoreOffload = %v, %v on; want an error and nothing changed", err, got)
				}
			case c.wantErr != nil:
				if !errors.Is(err, c.wantErr) || len(got) > 0 {
					t.Errorf("RestoreOffload = %v, %v on; want %v and nothing changed", err, got, c.wantErr)
				}
			default:
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("RestoreOffload = %v, %v on; want nil, %v", err, got, want)
				}
			}
		})
	}
}
