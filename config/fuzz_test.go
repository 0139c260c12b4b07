package config

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary files to Parse. It must never panic; it returns
// either a File or an error, never both; every error is a *Error naming the
// file; a File survives Marshal and Parse again unchanged, and its UAPI
// rendering is well-formed "key=value" lines without a blank line (which
// would end a UAPI set operation early).
//
//	go test ./config -run '^$' -fuzz FuzzParse -fuzztime 30s
func FuzzParse(f *testing.F) {
	seeds := []string{
		// The smallest valid file.
		"[Interface]\nPrivateKey = " + priv1 + "\n",
		// A full gateway file, all three sections.
		"[Interface]\nPrivateKey = " + priv1 + "\nListenPort = 51820\nAddress = 10.8.0.1/24, fd08::1/64\nMTU = 1420\n" +
			"[WGPIO]\nMode = fastpath\nWAN = eth0\nLAN = eth1\nAddressMode = owned\nQueues = 2\nCPUs = 0-1,3\n" +
			"SourcePorts = 51820-51835\nWANAddress = 198.18.0.2/24\nLANAddress = 198.19.0.1/24\nGateway = 198.18.0.1\n" +
			"XDPMode = auto\nMetricsAddress = 127.0.0.1:9586\nMetricsPeers = 5000\n" +
			"[Peer]\nPublicKey = " + pub2 + "\nPresharedKey = " + psk + "\nAllowedIPs = 10.8.0.2/32\n" +
			"Endpoint = [2001:db8::1]:51820\nPersistentKeepalive = 25\n",
		// Host name endpoint (the fuzz resolver answers), unused keys, comments.
		"; client\n[interface]\nprivatekey=" + priv3 + " # c\nDNS = 1.1.1.1\nPostUp = echo; echo\n" +
			"[peer]\npublickey=" + pub1 + "\nallowedips=0.0.0.0/0,::/0\nendpoint=vpn.example.com:51820\npersistentkeepalive=off\n",
		// Endpoint with a zone; IPv4-mapped addresses.
		"[Interface]\nPrivateKey = " + priv1 + "\nAddress = ::ffff:10.0.0.1/128\n[Peer]\nPublicKey = " + pub2 +
			"\nEndpoint = [fe80::1%eth0]:1\nAllowedIPs = ::ffff:0.0.0.0/96\n",
		// Errors of every kind at once.
		"PrivateKey = x\n[Interface]\nListenPort = 70000\n[Peer]\nEndpoint = 2001:db8::1:1\n[Peer]\n[WGPIO]\nCPUs = 5-1\n[X]\n",
		// Duplicate and own public keys.
		"[Interface]\nPrivateKey = " + priv1 + "\n[Peer]\nPublicKey = " + pub1 + "\n[Peer]\nPublicKey = " + pub2 +
			"\n[Peer]\nPublicKey = " + pub2 + "\n",
		// Headers and separators in odd places.
		"[]\n[[Peer]]\n=\n==\n[Interface\n]\n",
		// A failing resolver, and CRLF line ends.
		"[Interface]\r\nPrivateKey = " + priv1 + "\r\n[Peer]\r\nPublicKey = " + pub2 + "\r\nEndpoint = nx.example:1\r\n",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		file, err := testOpts.Parse("fuzz.conf", strings.NewReader(text))
		if (file == nil) == (err == nil) {
			t.Fatalf("Parse = %v, %v; want exactly one of File and error", file, err)
		}
		if err != nil {
			for _, e := range leafErrors(err) {
				var ce *Error
				if !errors.As(e, &ce) || ce.File != "fuzz.conf" {
					t.Fatalf("Parse error %q (%T) is not a *config.Error for fuzz.conf", e, e)
				}
			}
			return
		}
		out := file.Marshal()
		again, err := testOpts.Parse("fuzz.conf", strings.NewReader(string(out)))
		if err != nil {
			t.Fatalf("Parse(Marshal(f)) = %v; Marshal:\n%s", err, out)
		}
		if out2 := again.Marshal(); string(out2) != string(out) {
			t.Fatalf("Marshal not stable:\n%s\nthen\n%s", out, out2)
		}
		for _, line := range strings.Split(strings.TrimSuffix(file.UAPI(), "\n"), "\n") {
			if k, _, ok := strings.Cut(line, "="); !ok || k == "" {
				t.Fatalf("UAPI line %q is not key=value; body:\n%s", line, file.UAPI())
			}
		}
	})
}
