package config

import (
	"strconv"
	"strings"
)

// WG renders f as wg(8)'s configuration format, what `wg setconf` and `wg
// syncconf` take: [Interface] with PrivateKey, ListenPort and FwMark (if
// set), then each [Peer] with PublicKey, PresharedKey, AllowedIPs,
// Endpoint and PersistentKeepalive (those set), canonical key names, no
// comments. It is what `wg-quick strip` gives for a wg-quick file: the
// keys wg(8) refuses (Address, MTU, DNS, Table, the hooks, SaveConfig)
// and the [WGPIO] section are left out, so that `wg syncconf wg0
// <(wgpio strip wg0.conf)` applies an edited file to a running gateway.
// An Endpoint written as a host name is written as the address Parse
// resolved it to. The output holds the private and pre-shared keys in
// base64: treat it as secret.
func (f *File) WG() []byte {
	var b strings.Builder
	kv := func(k, v string) {
		b.WriteString(k)
		b.WriteString(" = ")
		b.WriteString(v)
		b.WriteByte('\n')
	}
	b.WriteString("[Interface]\n")
	kv("PrivateKey", f.Interface.PrivateKey.Base64())
	if f.Interface.ListenPort != 0 {
		kv("ListenPort", strconv.Itoa(int(f.Interface.ListenPort)))
	}
	for _, s := range f.Interface.Unused {
		if s.Key == "FwMark" {
			kv(s.Key, s.Value)
		}
	}
	for i := range f.Peers {
		p := &f.Peers[i]
		b.WriteString("\n[Peer]\n")
		kv("PublicKey", p.PublicKey.Base64())
		if !p.PresharedKey.IsZero() {
			kv("PresharedKey", p.PresharedKey.Base64())
		}
		if len(p.AllowedIPs) > 0 {
			kv("AllowedIPs", joinPrefixes(p.AllowedIPs))
		}
		if p.Endpoint.IsValid() {
			kv("Endpoint", p.Endpoint.String())
		}
		if p.PersistentKeepalive != 0 {
			kv("PersistentKeepalive", strconv.Itoa(int(p.PersistentKeepalive)))
		}
	}
	return []byte(b.String())
}
