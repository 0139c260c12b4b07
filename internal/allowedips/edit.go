package allowedips

import (
	"bytes"
	"crypto/ecdh"
	"net/netip"
	"strings"

	"golang.zx2c4.com/wireguard/device"
)

// maxEditLine bounds a line of a set that Edit keeps while it is
// incomplete, in bytes: wireguard-go's scanner refuses lines over 64 KiB,
// and no UAPI line is near this long, so a longer one marks the edit
// unfollowed rather than growing without bound.
const maxEditLine = 4096

// OpKind is what one line of a set does to the peers or their allowed
// IPs.
type OpKind uint8

// The kinds of Op, named by their UAPI keys.
const (
	OpPublicKey         OpKind = iota // public_key: select or create Op.Peer
	OpUpdateOnly                      // update_only: remove the peer if the set created it
	OpRemove                          // remove: remove the peer
	OpReplaceAllowedIPs               // replace_allowed_ips: empty the peer's allowed IPs
	OpAllowedIP                       // allowed_ip: give Op.Prefix to the peer, or take it (Op.Del)
	OpPrivateKey                      // private_key: remove the peer of Op.Peer, the key's public key
)

// Op is one line of a UAPI set that changes allowed IPs or peers, in the
// order it came.
type Op struct {
	Kind   OpKind
	Peer   device.NoisePublicKey // OpPublicKey; OpPrivateKey: the private key's public key
	Prefix netip.Prefix          // OpAllowedIP: masked
	Del    bool                  // OpAllowedIP: allowed_ip=-prefix
}

// Edit is an io.Writer that reads a UAPI set body as wireguard-go reads
// it (io.TeeReader), up to its blank line, and keeps the lines that move
// allowed IPs (Ops). Unfollowed marks a body whose effect on the allowed
// IPs it does not model: a device key other than private_key,
// listen_port and fwmark (replace_peers removes every peer: a whole read
// costs no more), or a line it cannot parse (over maxEditLine bytes, a
// bad key or prefix). The zero value is ready; single owner; Write never
// fails and keeps no more than one line of b.
type Edit struct {
	Ops        []Op
	Unfollowed bool
	inPeer     bool
	done       bool
	line       []byte
}

// Write takes the next bytes of the body.
func (e *Edit) Write(b []byte) (int, error) {
	n := len(b)
	for !e.done && len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(e.line)+len(b) > maxEditLine {
				e.Unfollowed, e.done = true, true
				break
			}
			e.line = append(e.line, b...)
			break
		}
		if len(e.line)+i > maxEditLine {
			e.Unfollowed, e.done = true, true
			break
		}
		e.line = append(e.line, b[:i]...)
		e.take(string(e.line))
		e.line, b = e.line[:0], b[i+1:]
	}
	return n, nil
}

// publicKey is the X25519 public key of sk (RFC 7748 §6.1), as
// wireguard-go computes it (device/noise-helpers.go).
func publicKey(sk device.NoisePrivateKey) device.NoisePublicKey {
	k, err := ecdh.X25519().NewPrivateKey(sk[:])
	if err != nil { // only for a key not 32 bytes long
		panic(err)
	}
	return device.NoisePublicKey(k.PublicKey().Bytes())
}

// take reads one line of the body, without its newline.
func (e *Edit) take(line string) {
	if line == "" {
		e.done = true
		return
	}
	key, value, _ := strings.Cut(line, "=")
	if key == "public_key" {
		e.inPeer = true
		op := Op{Kind: OpPublicKey}
		if op.Peer.FromHex(value) != nil {
			e.Unfollowed = true
		}
		e.Ops = append(e.Ops, op)
		return
	}
	if !e.inPeer {
		switch key {
		case "listen_port", "fwmark":
		case "private_key":
			op := Op{Kind: OpPrivateKey}
			var sk device.NoisePrivateKey
			if sk.FromMaybeZeroHex(value) != nil {
				e.Unfollowed = true
				return
			}
			op.Peer = publicKey(sk)
			e.Ops = append(e.Ops, op)
		default:
			e.Unfollowed = true
		}
		return
	}
	switch key {
	case "update_only":
		e.Ops = append(e.Ops, Op{Kind: OpUpdateOnly})
	case "remove":
		e.Ops = append(e.Ops, Op{Kind: OpRemove})
	case "replace_allowed_ips":
		e.Ops = append(e.Ops, Op{Kind: OpReplaceAllowedIPs})
	case "allowed_ip":
		op := Op{Kind: OpAllowedIP}
		value, op.Del = strings.CutPrefix(value, "-")
		p, err := netip.ParsePrefix(value)
		if err != nil {
			e.Unfollowed = true
			return
		}
		op.Prefix = p.Masked()
		e.Ops = append(e.Ops, op)
	}
}
