package config

import "strconv"

// WG renders f as wg(8)'s configuration format, what `wg setconf` and `wg
// syncconf` take: [Interface] with PrivateKey, ListenPort and FwMark (if
// set), then each [Peer] with PublicKey, PresharedKey, AllowedIPs,
// Endpoint and PersistentKeepalive (those set; a keepalive written as 0
// or off too, as "PersistentKeepalive = 0": `wg-quick strip` keeps every
// line but the wg-quick keys), canonical key names, no
// comments. It is what `wg-quick strip` gives for a wg-quick file: the
// keys wg(8) refuses (Address, MTU, DNS, Table, the hooks, SaveConfig)
// and the [WGPIO] section are left out, so that `wg syncconf wg0
// <(wgpio strip wg0.conf)` applies an edited file to a running gateway.
// An Endpoint written as a host name is written as the address Parse
// resolved it to. The output holds the private and pre-shared keys in
// base64: treat it as secret.
func (f *File) WG() []byte {
	var b cfgWriter
	b.WriteString("[Interface]\n")
	b.kv("PrivateKey", f.Interface.PrivateKey.Base64())
	if f.Interface.ListenPort != 0 {
		b.kv("ListenPort", strconv.Itoa(int(f.Interface.ListenPort)))
	}
	for _, s := range f.Interface.Unused {
		if s.Key == "FwMark" {
			b.kv(s.Key, s.Value)
		}
	}
	b.peers(f.Peers, false)
	return []byte(b.String())
}
