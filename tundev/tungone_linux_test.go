package tundev

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestTUNArgs: an MTU outside the TUN driver's range is refused before
// anything is created (MultiQueueTUN took 0 and negative MTUs as "leave
// it" while MTU reported them; OpenOffloadTUN leaked wireguard-go's
// netlink goroutines and descriptors on them), and a name pattern (tun%d,
// or empty) names the interface the kernel made (setting its MTU failed
// with "no such device" on the pattern, and the interface was destroyed).
func TestTUNArgs(t *testing.T) {
	tp := testenv.Topology(t, "ta")
	ns := testenv.NS(t, tp, "a")
	for _, mtu := range []int{-1, 0, 67, 65536} {
		err := ns.Do(func() error {
			d, err := OpenMultiQueueTUN("wgpta0", 1, mtu)
			if err == nil {
				d.Close()
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "want 68 to 65535") {
			t.Errorf("OpenMultiQueueTUN(mtu %d) = %v, want an error naming the range", mtu, err)
		}
		err = ns.Do(func() error {
			d, err := OpenOffloadTUN("wgpta0", 1, mtu)
			if err == nil {
				d.Close()
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "want 68 to 65535") {
			t.Errorf("OpenOffloadTUN(mtu %d) = %v, want an error naming the range", mtu, err)
		}
	}
	if err := ns.Do(func() error {
		d, err := OpenMultiQueueTUN("wgpta%d", 2, 1400)
		if err != nil {
			return err
		}
		defer d.Close()
		name, _ := d.Name()
		ifi, err := net.InterfaceByName(name)
		if err != nil || !strings.HasPrefix(name, "wgpta") || strings.Contains(name, "%") || ifi.MTU != 1400 {
			t.Errorf("OpenMultiQueueTUN(wgpta%%d): Name() = %q, interface %+v, %v", name, ifi, err)
		}
		o, err := OpenOffloadTUN("", 1, 1400)
		if err != nil {
			return err
		}
		defer o.Close()
		if _, err := net.InterfaceByName(o.name); err != nil || o.name == "" {
			t.Errorf("OpenOffloadTUN(\"\"): name %q: %v", o.name, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestTUNDeleted: a TUN whose interface is deleted under its reader
// (ip link del) makes Read return an error that says so, on every call:
// MultiQueueTUN's Read returned it once and then blocked for ever;
// OffloadTUN's returned os.ErrClosed, which its caller (fastgw's
// exception reader) takes for its own Close and stops without a word.
func TestTUNDeleted(t *testing.T) {
	tp := testenv.Topology(t, "td")
	ns := testenv.NS(t, tp, "a")
	var mq *MultiQueueTUN
	var off *OffloadTUN
	if err := ns.Do(func() error {
		var err error
		if mq, err = OpenMultiQueueTUN("wgptd0", 1, 1420); err != nil {
			return err
		}
		off, err = OpenOffloadTUN("wgptd1", 1, 1420)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer mq.Close()
	defer off.Close()
	bufs := make([][]byte, off.BatchSize())
	for i := range bufs {
		bufs[i] = make([]byte, 65535)
	}
	sizes := make([]int, len(bufs))
	for _, dev := range []string{"wgptd0", "wgptd1"} {
		if out, err := ns.Run("ip", "link", "del", dev); err != nil {
			t.Fatalf("ip link del %s: %v: %s", dev, err, out)
		}
	}
	for name, read := range map[string]func() error{
		"MultiQueueTUN": func() error { _, err := mq.Read(bufs, sizes, 0); return err },
		"OffloadTUN":    func() error { _, err := off.Read(bufs, sizes, 0); return err },
	} {
		errs := 0
		for i := 0; errs < 3 && i < 20; i++ { // packets read before the deletion come first
			done := make(chan error, 1)
			go func() { done <- read() }()
			select {
			case err := <-done:
				if err == nil {
					continue
				}
				errs++
				if errors.Is(err, os.ErrClosed) || !strings.Contains(err.Error(), "interface is gone") {
					t.Errorf("%s: Read after ip link del = %v, want an error saying the interface is gone, not os.ErrClosed", name, err)
				}
			case <-time.After(3 * time.Second):
				t.Fatalf("%s: Read call %d after ip link del still blocked after 3 s", name, i)
			}
		}
		if errs < 3 {
			t.Errorf("%s: %d errors after ip link del, want one per Read", name, errs)
		}
	}
}

// TestAnswerNoRouteAfterClose: AnswerNoRoute after Close is an error and
// keeps no socket open (it left two raw sockets open for ever).
func TestAnswerNoRouteAfterClose(t *testing.T) {
	tp := testenv.Topology(t, "tc")
	ns := testenv.NS(t, tp, "a")
	var mq *MultiQueueTUN
	if err := ns.Do(func() error {
		var err error
		mq, err = OpenMultiQueueTUN("wgptc0", 1, 1420)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	mq.Close()
	before := openFiles(t)
	if err := ns.Do(func() error { return mq.AnswerNoRoute(ICMPRate{}) }); !errors.Is(err, os.ErrClosed) {
		t.Errorf("AnswerNoRoute after Close = %v, want os.ErrClosed", err)
	}
	if after := openFiles(t); after != before {
		t.Errorf("%d open files after AnswerNoRoute on a closed TUN, %d before", after, before)
	}
}

func openFiles(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
