package gateway

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/noise"
)

// TestIpcUpdateWaitsForSocketSet: IpcUpdate (a reload's read of the
// running peers and its set) and IpcSet wait for a set request of the UAPI
// socket in progress, which is applied in batches, and then see all of
// it. Before, a reload ran between two batches of a `wg addconf` of 4,000
// peers: it read the peers of the first, removed them, and 589 were left.
func TestIpcUpdateWaitsForSocketSet(t *testing.T) {
	d := ourDevice(t, "")
	c := serve(t, d)
	var first, rest strings.Builder
	n := 0
	for b := &first; rest.Len() < 4096; n++ {
		if first.Len() > uapiBatchBytes*3/2 { // a batch's lines, without their newlines, and more
			b = &rest
		}
		var k noise.PublicKey
		k[0], k[1], k[2] = byte(n), byte(n>>8), 7
		fmt.Fprintf(b, "public_key=%s\nallowed_ip=10.%d.%d.0/24\n", k.Hex(), byte(n>>8), byte(n))
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := io.WriteString(c, "set=1\n"+first.String())
		wrote <- err
	}()
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	// The first batch is applied while the request goes on.
	if !testenv.PollUntil(10*time.Second, func() bool {
		var b strings.Builder
		d.IpcGet(&b)
		return strings.Contains(b.String(), "public_key=")
	}) {
		t.Fatal("the first batch of the request was not applied")
	}
	seen := make(chan int, 1)
	updated := make(chan error, 1)
	go func() {
		updated <- d.IpcUpdate(func(running string) (string, error) {
			seen <- strings.Count(running, "public_key=")
			return "", nil
		})
	}()
	select {
	case got := <-seen:
		t.Errorf("IpcUpdate ran in the middle of a set request, seeing %d of its %d peers", got, n)
		<-updated
		return
	case <-time.After(200 * time.Millisecond):
	}
	go io.WriteString(c, rest.String()+"\n")
	if errno := readErrno(t, bufio.NewReader(c)); errno != 0 {
		t.Fatalf("set request: errno %d", errno)
	}
	select {
	case got := <-seen:
		if got != n {
			t.Errorf("IpcUpdate saw %d peers, want the request's %d", got, n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("IpcUpdate did not run after the set request ended")
	}
	// Its result before the device closes (the test's cleanup).
	if err := <-updated; err != nil {
		t.Errorf("IpcUpdate: %v", err)
	}
}
