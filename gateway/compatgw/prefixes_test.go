//go:build linux

package compatgw

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/downdev"
	"github.com/wgpio/wgpio/noise"
)

// fakeFilter is a LAN prefix filter that records its content.
type fakeFilter struct {
	mu  sync.Mutex
	set map[netip.Prefix]bool
}

func (f *fakeFilter) AddPrefix(p netip.Prefix) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set[p] = true
	return nil
}

func (f *fakeFilter) DeletePrefix(p netip.Prefix) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.set, p)
	return nil
}

func (f *fakeFilter) holds() []netip.Prefix {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.SortedFunc(maps.Keys(f.set), func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
}

// TestFilterFollowsUAPI: a wg(8) change over the UAPI socket reaches the
// LAN filter when the client's connection closes, not a SyncInterval
// later (a sync reads the whole configuration: with many peers it runs
// seldom); prefixes that leave the allowed IPs stay in it (kept).
func TestFilterFollowsUAPI(t *testing.T) {
	testenv.Root(t)
	var b [3]byte
	rand.Read(b[:])
	name := "wgpcg" + hex.EncodeToString(b[:])
	f := &fakeFilter{set: map[netip.Prefix]bool{}}
	g := newGateway(slog.New(slog.DiscardHandler))
	g.filter = f
	g.dev = downdev.New()
	if err := g.serveUAPI(name); err != nil {
		t.Fatal(err)
	}
	g.wg.Add(1)
	go g.followPrefixes(time.Hour)
	defer func() {
		close(g.stop)
		for _, c := range g.closers {
			c()
		}
		g.wg.Wait()
		g.dev.Close()
	}()
	k, _ := noise.NewPrivateKey()
	pub := k.PublicKey()
	for _, step := range []struct {
		set  string
		want []netip.Prefix
	}{
		{"public_key=" + pub.Hex() + "\nallowed_ip=198.19.7.0/24\nallowed_ip=2001:db8::/32\n",
			[]netip.Prefix{netip.MustParsePrefix("198.19.7.0/24"), netip.MustParsePrefix("2001:db8::/32")}},
		{"public_key=" + pub.Hex() + "\nallowed_ip=-2001:db8::/32\nallowed_ip=198.19.0.0/16\n",
			[]netip.Prefix{netip.MustParsePrefix("198.19.0.0/16"), netip.MustParsePrefix("198.19.7.0/24"), netip.MustParsePrefix("2001:db8::/32")}},
		// The /24, inside the /16, needs no keeping.
		{"public_key=" + pub.Hex() + "\nallowed_ip=-198.19.7.0/24\n",
			[]netip.Prefix{netip.MustParsePrefix("198.19.0.0/16"), netip.MustParsePrefix("2001:db8::/32")}},
		{"public_key=" + pub.Hex() + "\nremove=true\n",
			[]netip.Prefix{netip.MustParsePrefix("198.19.0.0/16"), netip.MustParsePrefix("2001:db8::/32")}},
	} {
		c, err := net.Dial("unix", "/var/run/wireguard/"+name+".sock")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "set=1\n%s\n", step.set)
		reply, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || reply != "errno=0\n" {
			t.Fatalf("set %q: reply %q, %v", step.set, reply, err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !slices.Equal(f.holds(), step.want) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := f.holds(); !slices.Equal(got, step.want) {
			t.Fatalf("after set %q: the LAN filter holds %v, want %v", step.set, got, step.want)
		}
	}
}

// fullFilter refuses every prefix, as a LAN map too small for the
// configuration does beyond its capacity.
type fullFilter struct{}

func (fullFilter) AddPrefix(p netip.Prefix) error    { return fmt.Errorf("%v: %w", p, syscall.ENOSPC) }
func (fullFilter) DeletePrefix(p netip.Prefix) error { return nil }

// TestSyncErrorsCapped: a sync whose every prefix fails names
// maxPrefixErrors of them and counts the others, instead of listing
// thousands in one warning at every sync.
func TestSyncErrorsCapped(t *testing.T) {
	g := newGateway(slog.New(slog.DiscardHandler))
	g.filter = fullFilter{}
	g.dev = downdev.New()
	defer g.dev.Close()
	const n = 1000
	var set strings.Builder
	for i := range n {
		k, _ := noise.NewPrivateKey()
		pub := k.PublicKey()
		fmt.Fprintf(&set, "public_key=%s\nallowed_ip=10.%d.%d.0/24\n", pub.Hex(), i>>8, i&255)
	}
	if err := g.dev.IpcSet(set.String()); err != nil {
		t.Fatal(err)
	}
	err := g.syncPrefixes()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("syncPrefixes = %v, want ENOSPC", err)
	}
	lines := strings.Split(err.Error(), "\n")
	want := fmt.Sprintf("%d more prefixes failed (%d in all), not listed", n-maxPrefixErrors, n)
	if len(lines) != maxPrefixErrors+1 || lines[len(lines)-1] != want {
		t.Errorf("syncPrefixes error has %d lines, the last %q; want %d, the last %q", len(lines), lines[len(lines)-1], maxPrefixErrors+1, want)
	}
}

// fakeNoRoute records what syncPrefixes hands the PortDevice.
type fakeNoRoute struct{ drop, pass []netip.Prefix }

func (f *fakeNoRoute) SetNoRoute(drop, pass []netip.Prefix) {
	f.drop, f.pass = sortedPrefixes(drop), sortedPrefixes(pass)
}

func sortedPrefixes(ps []netip.Prefix) []netip.Prefix {
	return slices.SortedFunc(slices.Values(ps), func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
}

// TestKeptPrefixes: a prefix that leaves wireguard-go's allowed IPs stays
// in the LAN filter and is handed to the PortDevice to drop (with the
// allowed IPs inside it, to pass), unless it is a default route or a
// configured prefix contains it; it leaves the drop set when configured
// again, and the filter when a configured prefix comes to contain it or
// needs its slot (logged).
func TestKeptPrefixes(t *testing.T) {
	var logs strings.Builder
	g := newGateway(slog.New(slog.NewTextHandler(&logs, nil)))
	f, nr := &fakeFilter{set: map[netip.Prefix]bool{}}, &fakeNoRoute{}
	g.filter, g.noRoute = f, nr
	g.dev = downdev.New()
	defer g.dev.Close()
	keys := map[string]string{}
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		k, _ := noise.NewPrivateKey()
		pub := k.PublicKey()
		keys[name] = pub.Hex()
	}
	pfx := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	for _, step := range []struct {
		what, set        string
		filter           []netip.Prefix
		drop, pass       []netip.Prefix
		capacity, keptN4 int
	}{
		{what: "configured",
			set:    "public_key=a\nallowed_ip=10.1.0.0/16\nallowed_ip=10.2.0.0/24\nallowed_ip=0.0.0.0/0\npublic_key=b\nallowed_ip=10.1.5.0/24\n",
			filter: pfx("0.0.0.0/0", "10.1.0.0/16", "10.1.5.0/24", "10.2.0.0/24")},
		{what: "a removed: its prefixes kept, the default route not", set: "public_key=a\nremove=true\n",
			filter: pfx("10.1.0.0/16", "10.1.5.0/24", "10.2.0.0/24"),
			drop:   pfx("10.1.0.0/16", "10.2.0.0/24"), pass: pfx("10.1.5.0/24"), keptN4: 2},
		{what: "a prefix containing the kept ones", set: "public_key=c\nallowed_ip=10.0.0.0/8\n",
			filter: pfx("10.0.0.0/8", "10.1.5.0/24")},
		{what: "c removed", set: "public_key=c\nremove=true\n",
			filter: pfx("10.0.0.0/8", "10.1.5.0/24"), drop: pfx("10.0.0.0/8"), pass: pfx("10.1.5.0/24"), keptN4: 1},
		{what: "configured again", set: "public_key=d\nallowed_ip=10.0.0.0/8\n",
			filter: pfx("10.0.0.0/8", "10.1.5.0/24")},
		{what: "d removed", set: "public_key=d\nremove=true\n",
			filter: pfx("10.0.0.0/8", "10.1.5.0/24"), drop: pfx("10.0.0.0/8"), pass: pfx("10.1.5.0/24"), keptN4: 1},
		{what: "configured again, with a prefix inside", set: "public_key=e\nallowed_ip=10.0.0.0/8\nallowed_ip=10.9.0.0/16\n",
			filter: pfx("10.0.0.0/8", "10.1.5.0/24", "10.9.0.0/16")},
		{what: "e removed: both kept", set: "public_key=e\nremove=true\n",
			filter: pfx("10.0.0.0/8", "10.1.5.0/24", "10.9.0.0/16"), drop: pfx("10.0.0.0/8", "10.9.0.0/16"), pass: pfx("10.1.5.0/24"), keptN4: 2},
		{what: "the kept outer prefix back: the inner one inside it", set: "public_key=f\nallowed_ip=10.0.0.0/8\n",
			filter: pfx("10.0.0.0/8", "10.1.5.0/24")},
		{what: "f removed", set: "public_key=f\nremove=true\n",
			filter: pfx("10.0.0.0/8", "10.1.5.0/24"), drop: pfx("10.0.0.0/8"), pass: pfx("10.1.5.0/24"), keptN4: 1},
		{what: "a configured prefix needs the kept one's slot", capacity: 3,
			set:    "public_key=c\nallowed_ip=192.0.2.0/24\nallowed_ip=198.51.100.0/24\n",
			filter: pfx("10.1.5.0/24", "192.0.2.0/24", "198.51.100.0/24")},
	} {
		if step.capacity > 0 {
			g.capacity = step.capacity
		}
		set := step.set
		for name, hex := range keys {
			set = strings.ReplaceAll(set, "public_key="+name+"\n", "public_key="+hex+"\n")
		}
		if err := g.dev.IpcSet(set); err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		if err := g.syncPrefixes(); err != nil {
			t.Fatalf("%s: syncPrefixes = %v", step.what, err)
		}
		if got := f.holds(); !slices.Equal(got, step.filter) {
			t.Errorf("%s: the LAN filter holds %v, want %v", step.what, got, step.filter)
		}
		if !slices.Equal(nr.drop, step.drop) || !slices.Equal(nr.pass, step.pass) {
			t.Errorf("%s: the PortDevice drops %v, passes %v; want %v, %v", step.what, nr.drop, nr.pass, step.drop, step.pass)
		}
		if g.keptN[0] != step.keptN4 || len(g.kept) != step.keptN4 || g.inFilter[0] != len(step.filter) {
			t.Errorf("%s: %d (%d) kept, %d in the filter; want %d, %d", step.what, g.keptN[0], len(g.kept), g.inFilter[0], step.keptN4, len(step.filter))
		}
	}
	if !strings.Contains(logs.String(), "no longer kept") || !strings.Contains(logs.String(), "first=10.0.0.0/8") {
		t.Errorf("the log does not say a kept prefix gave its slot:\n%s", logs.String())
	}
}
