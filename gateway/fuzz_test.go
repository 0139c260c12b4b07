package gateway

import (
	"flag"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.zx2c4.com/wireguard/ipc"
)

// fuzzing reports whether -test.fuzz is set (flags are parsed by then).
// On the seed corpus (plain go test) FuzzUAPISet also runs each input
// through stock wireguard-go, the known answer, and requires the same errno
// and get=1 output; while fuzzing it does not: a wireguard-go device per
// input brings the fuzzing workers to a crawl.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// FuzzUAPISet feeds arbitrary "set=1" request bodies to our Device: no
// panic, only the errnos wireguard-go uses, and get=1 output that round
// trips through set=1. On the seeds it also compares with wireguard-go.
func FuzzUAPISet(f *testing.F) {
	const (
		priv = "e84b5a6d2717c1003a13b431570353dbaca9146cf150c5f8575680feba52027a" // a private key (unclamped: wireguard-go clamps it)
		pub1 = "b85996fecc9c7f1fc6d2572a76eda11d59bcd20be8e543b15ce4bd85a8e75a33"
		pub2 = "58402e695ba1772b1cc9309755f043251ea77fdcf10fbe63989ceae4b14ac6dc"
		psk  = "188515093e952f5f22e865cef3012e72f8b5f0b598ac0309d5dacce3b70fcf52"
	)
	for _, seed := range []string{
		"private_key=" + priv + "\nlisten_port=51820\nfwmark=1\n",                                                // device keys
		"private_key=" + strings.Repeat("0", 64) + "\n",                                                          // zero key: none
		"public_key=" + pub1 + "\npreshared_key=" + psk + "\nendpoint=198.18.0.2:51820\n",                        // peer with PSK and endpoint
		"public_key=" + pub1 + "\nendpoint=[::ffff:198.18.0.2]:1\n",                                              // IPv4-mapped endpoint kept as given
		"public_key=" + pub1 + "\nallowed_ip=198.19.0.1/24\nallowed_ip=-198.19.0.0/24\n",                         // add then remove (masked)
		"public_key=" + pub1 + "\nallowed_ip=198.19.0.0/24\npublic_key=" + pub2 + "\nallowed_ip=198.19.0.0/24\n", // prefix moves
		"public_key=" + pub1 + "\nupdate_only=true\nallowed_ip=::/0\n",                                           // update_only on a new peer
		"public_key=" + pub1 + "\nremove=true\n",                                                                 // remove
		"public_key=" + pub1 + "\npersistent_keepalive_interval=25\nreplace_allowed_ips=true\n",                  // keepalive
		"replace_peers=true\npublic_key=" + pub2 + "\nprotocol_version=1\n",                                      // replace peers
		"public_key=" + strings.Repeat("0", 64) + "\n",                                                           // zero key is our own (no private key)
		"listen_port=65536\n",                                     // out of range
		"public_key=" + pub1 + "\nbogus\n",                        // no '='
		"private_key=" + strings.ToUpper(priv) + "\n",             // upper-case hex
		"public_key=" + pub1 + "\r\nallowed_ip=198.19.0.0/24\r\n", // CRLF
		"\npublic_key=" + pub1 + "\n",                             // blank first line ends at once
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, req string) {
		ours := ourDevice(t, "")
		err := ours.IpcSet(strings.NewReader(req))
		switch errnoOf(err) {
		case 0, ipc.IpcErrorInvalid, ipc.IpcErrorProtocol, ipc.IpcErrorIO:
		default:
			t.Fatalf("IpcSet error %v: errno not one wireguard-go uses", err)
		}
		var b strings.Builder
		if err := ours.IpcGet(&b); err != nil {
			t.Fatal(err)
		}
		get := b.String()
		// Round trip: the settable lines of get=1, applied to a fresh
		// device, give the same get=1.
		var set strings.Builder
		for _, line := range strings.Split(get, "\n") {
			k, _, _ := strings.Cut(line, "=")
			switch k {
			case "private_key", "listen_port", "fwmark", "public_key", "preshared_key", "endpoint",
				"persistent_keepalive_interval", "allowed_ip", "protocol_version":
				set.WriteString(line + "\n")
			}
		}
		again := ourDevice(t, "")
		if err := again.IpcSet(strings.NewReader(set.String())); err != nil {
			t.Fatalf("re-applying get=1 output: %v\n%s", err, set.String())
		}
		var b2 strings.Builder
		if err := again.IpcGet(&b2); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(normalize(get, ""), normalize(b2.String(), "")); diff != "" {
			t.Fatalf("get=1 after round trip differs (-first +second):\n%s", diff)
		}
		if fuzzing() {
			return
		}
		ref := refDevice(t, "")
		refErr := ref.IpcSet(req)
		if got, want := errnoOf(err), errnoOf(refErr); got != want {
			t.Fatalf("errno = %d (%v), want %d (%v)", got, err, want, refErr)
		}
		refGet, gerr := ref.IpcGet()
		if gerr != nil {
			t.Fatal(gerr)
		}
		if diff := cmp.Diff(normalize(refGet, ""), normalize(get, "")); diff != "" {
			t.Fatalf("get=1 mismatch (-wireguard-go +ours):\n%s", diff)
		}
	})
}
