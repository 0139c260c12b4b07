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

// TestListenPortMoveTellsPeers: a listen port moved through the UAPI sends
// a keepalive from the new port to every peer with a session, so that
// each follows it at once; where only the peer sent, its packets went to
// the old port until its handshake retried 15 s later. Linux and
// wireguard-go send nothing then.
func TestListenPortMoveTellsPeers(t *testing.T) {
	r := newRig(t, rigOptions{ourEP: "127.0.0.1:1"})
	r.establishAsResponder()
	r.dev.opts.SetListenPort = func(p uint16) (uint16, error) { return p, nil }
	mark := r.f.nsent()
	before := r.dev.Stats().KeepalivesSent
	if err := r.dev.IpcSet(strings.NewReader("listen_port=40000\n")); err != nil {
		t.Fatal(err)
	}
	if n := len(ofType(r.f.sentSince(mark), noise.TypeTransport, noise.KeepaliveSize)); n != 1 {
		t.Errorf("after the move: %d keepalives sent, want 1 (%v)", n, types(r.f.sentSince(mark)))
	}
	if got := r.dev.Stats().KeepalivesSent; got != before+1 {
		t.Errorf("keepalives_sent %d → %d, want one more", before, got)
	}
	// The same port again moves nothing and sends nothing.
	mark = r.f.nsent()
	if err := r.dev.IpcSet(strings.NewReader("listen_port=40000\n")); err != nil {
		t.Fatal(err)
	}
	if n := len(r.f.sentSince(mark)); n != 0 {
		t.Errorf("the same port again: %d packets sent, want none", n)
	}
}
