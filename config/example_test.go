package config_test

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/wgpio/wgpio/config"
)

func ExampleParse() {
	const text = `
[Interface]
PrivateKey = GCchTEm7noREIiwG/ALpM8MlTe/48SJMjs8cRCZIh2g=
ListenPort = 51820
PostUp = iptables -A FORWARD -i %i -j ACCEPT

[WGPIO]
Mode = fastpath
WAN = eth0
LAN = eth1

[Peer]
PublicKey = FELmkFHd7oDx8G88ut8XjiVWGlhI1v1uP9JS3sNnVQM=
AllowedIPs = 10.8.0.2/32
Endpoint = 203.0.113.20:51820
`
	f, err := config.Parse("wg0.conf", strings.NewReader(text))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.WGPIO.Mode, f.WGPIO.WAN, f.WGPIO.LAN, f.Peers[0].Endpoint)
	for _, w := range f.Warnings {
		fmt.Println("warning:", w)
	}
	// Output:
	// fastpath eth0 eth1 203.0.113.20:51820
	// warning: wg0.conf:5: key "PostUp": ignored: wgpio runs no commands (wg-quick runs them with bash); run it from ExecStartPost= in a drop-in of wgpio@.service (systemctl edit wgpio@NAME)
}

func ExampleParse_errors() {
	const text = `[Interface]
PrivateKey = GCchTEm7noREIiwG/ALpM8MlTe/48SJMjs8cRCZIh2g=
ListenPort = 70000
ListenPrt = 51820
[Peer]
AllowedIPs = 10.8.0.2/32
`
	_, err := config.Parse("wg0.conf", strings.NewReader(text))
	fmt.Println(err)
	// Output:
	// wg0.conf:3: key "ListenPort": port 70000 out of range 1-65535
	// wg0.conf:4: key "ListenPrt": unknown key in [Interface]; did you mean "ListenPort"?
	// wg0.conf:5: [Peer] has no PublicKey
}

func ExampleOptions() {
	opts := config.Options{Resolve: func(host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("198.51.100.1")}, nil // no DNS in this example
	}}
	f, err := opts.Parse("wg0.conf", strings.NewReader(`[Interface]
PrivateKey = GCchTEm7noREIiwG/ALpM8MlTe/48SJMjs8cRCZIh2g=
[Peer]
PublicKey = FELmkFHd7oDx8G88ut8XjiVWGlhI1v1uP9JS3sNnVQM=
AllowedIPs = 0.0.0.0/0
Endpoint = vpn.example.com:51820
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.Peers[0].EndpointHost, f.Peers[0].Endpoint)
	// Output: vpn.example.com 198.51.100.1:51820
}
