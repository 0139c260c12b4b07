package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpio/wgpio/noise"
)

// TestResolveAtOnce: with the default resolver a file's Endpoint host
// names are looked up at once (at most MaxResolving at a time, more than
// one in flight), each name once, and each peer gets its own name's
// address, the errors at their lines in the file's order. They were looked up one after another: 3
// names on a resolver that does not answer took 30 s.
func TestResolveAtOnce(t *testing.T) {
	const peers, delay = 40, 100 * time.Millisecond
	var calls, running, most atomic.Int32
	var mu sync.Mutex
	seen := map[string]int{}
	defer func(old func(string) ([]netip.Addr, error)) { defaultResolve = old }(defaultResolve)
	defaultResolve = func(host string) ([]netip.Addr, error) {
		calls.Add(1)
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		mu.Lock()
		seen[host]++
		mu.Unlock()
		time.Sleep(delay)
		var i int
		if _, err := fmt.Sscanf(host, "peer%d.example.net", &i); err != nil || i%10 == 7 {
			return nil, errors.New("no such host")
		}
		return []netip.Addr{netip.AddrFrom4([4]byte{198, 18, 1, byte(i)})}, nil
	}
	var b strings.Builder
	b.WriteString("[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\n")
	for i := range peers {
		k, err := noise.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		pub := k.PublicKey()
		host := fmt.Sprintf("peer%d.example.net", i%(peers/2)) // each name twice
		fmt.Fprintf(&b, "[Peer]\nPublicKey = %s\nEndpoint = %s:51820\nAllowedIPs = 198.19.%d.0/24\n", pub.Base64(), host, i)
	}
	_, err := Parse("wg0.conf", strings.NewReader(b.String()))
	if calls.Load() != peers/2 {
		t.Errorf("%d lookups, want %d (each name once)", calls.Load(), peers/2)
	}
	for h, n := range seen {
		if n != 1 {
			t.Errorf("%s looked up %d times, want once", h, n)
		}
	}
	// Each lookup waits: more than one ran at once (not timed: the
	// count of lookups in flight says it).
	if m := most.Load(); m < 2 || m > MaxResolving {
		t.Errorf("at most %d lookups at once, want 2 to %d", m, MaxResolving)
	}
	// peer7 and peer17 fail, each twice: 4 errors at their Endpoint
	// lines (line 3 + 4 per peer), in the file's order.
	want := []string{
		`wg0.conf:33: key "Endpoint": resolve "peer7.example.net": no such host`,
		`wg0.conf:73: key "Endpoint": resolve "peer17.example.net": no such host`,
		`wg0.conf:113: key "Endpoint": resolve "peer7.example.net": no such host`,
		`wg0.conf:153: key "Endpoint": resolve "peer17.example.net": no such host`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Fatalf("Parse = %v, want\n%s", err, strings.Join(want, "\n"))
	}
	// Without the failing names, every peer has its own name's address.
	text := strings.NewReplacer("peer7.", "peer8.", "peer17.", "peer18.").Replace(b.String())
	f, err := Parse("wg0.conf", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range f.Peers {
		j := i % (peers / 2)
		if j == 7 || j == 17 {
			j++
		}
		if want := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 1, byte(j)}), 51820); p.Endpoint != want || p.EndpointHost != fmt.Sprintf("peer%d.example.net", j) {
			t.Errorf("peer %d: Endpoint %v (%s), want %v", i, p.Endpoint, p.EndpointHost, want)
		}
	}
}

// TestResolveStopsAtMaxErrors: as reading stops at MaxErrors problems,
// so do the lookups: a file of 200 names that all fail is not looked up
// whole (200 × ResolveTimeout on a resolver that does not answer).
func TestResolveStopsAtMaxErrors(t *testing.T) {
	var calls atomic.Int32
	defer func(old func(string) ([]netip.Addr, error)) { defaultResolve = old }(defaultResolve)
	defaultResolve = func(string) ([]netip.Addr, error) {
		calls.Add(1)
		return nil, errors.New("no such host")
	}
	var b strings.Builder
	b.WriteString("[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\n")
	for i := range 200 {
		k, err := noise.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		pub := k.PublicKey()
		fmt.Fprintf(&b, "[Peer]\nPublicKey = %s\nEndpoint = n%d.example.net:51820\n", pub.Base64(), i)
	}
	_, err := Parse("wg0.conf", strings.NewReader(b.String()))
	if n := calls.Load(); n < MaxErrors || n > MaxErrors+MaxResolving {
		t.Errorf("%d lookups, want %d to %d", n, MaxErrors, MaxErrors+MaxResolving)
	}
	if err == nil || !strings.HasSuffix(err.Error(), fmt.Sprintf("wg0.conf: too many errors (%d); stopped resolving Endpoint host names", MaxErrors)) {
		t.Errorf("Parse = %v, want it to end with the stop", err)
	}
}
