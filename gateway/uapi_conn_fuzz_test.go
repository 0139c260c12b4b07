package gateway

import (
	"bufio"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzUAPISetConn sends arbitrary set=1 bodies over the UAPI socket
// (ServeUAPI, which reads a request in batches as it arrives: ipcSetConn)
// and gives the same body to IpcSet on another device: the errno and the
// get=1 that follow are the same. wireguard-go serves its socket with the
// same line reader as its IpcSet (a bufio.Scanner, which drops the CR of
// a CRLF line end), so the two paths must not differ either.
//
//	go test ./gateway -run '^$' -fuzz FuzzUAPISetConn -fuzztime 60s
func FuzzUAPISetConn(f *testing.F) {
	const (
		priv = "e84b5a6d2717c1003a13b431570353dbaca9146cf150c5f8575680feba52027a"
		pub1 = "b85996fecc9c7f1fc6d2572a76eda11d59bcd20be8e543b15ce4bd85a8e75a33"
	)
	for _, seed := range []string{
		"private_key=" + priv + "\nlisten_port=51820\n",                                         // device keys
		"public_key=" + pub1 + "\nallowed_ip=198.19.0.0/24\npersistent_keepalive_interval=25\n", // a peer
		"public_key=" + pub1 + "\r\nallowed_ip=198.19.0.0/24\r\n\r\n",                           // CRLF line ends, a CRLF blank line
		"public_key=" + pub1 + "\nallowed_ip=198.19.0.0/33\nendpoint=198.18.0.2:1\n",            // stops at the bad line
		"public_key=" + pub1 + "\nbogus\n",                                                      // no '='
		"listen_port=1\r\n",                                                                     // CRLF on a device key
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		// Both read up to the first blank line; the socket needs one at
		// the end of the request.
		req := body + "\n\n"
		viaIpc := ourDevice(t, "")
		ipcErr := viaIpc.IpcSet(strings.NewReader(req))

		viaConn := ourDevice(t, "")
		c := serve(t, viaConn)
		go func() {
			io.WriteString(c, "set=1\n"+req)
		}()
		got := readErrno(t, bufio.NewReader(c))
		if want := errnoOf(ipcErr); got != want {
			t.Fatalf("set over the socket: errno %d, IpcSet: %d (%v); body %q", got, want, ipcErr, body)
		}
		var a, b strings.Builder
		if err := viaIpc.IpcGet(&a); err != nil {
			t.Fatal(err)
		}
		if err := viaConn.IpcGet(&b); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a.String(), b.String()); diff != "" {
			t.Fatalf("get=1 after the set (-IpcSet +socket); body %q:\n%s", body, diff)
		}
	})
}
