package main

import (
	"bytes"
	"net/netip"
	"strings"

	"golang.zx2c4.com/wireguard/device"
)

// maxEditLine bounds a line of a set that allowedEdit keeps while it is
// incomplete, in bytes: wireguard-go's scanner refuses lines over 64 KiB,
// and no UAPI line is near this long, so a longer one marks the edit
// unfollowed rather than growing without bound.
const maxEditLine = 4096

// editOp is one line of a UAPI set that changes allowed IPs or peers
// (https://www.wireguard.com/xplatform/), in the order it came.
type editOp struct {
	key    string // public_key, update_only, remove, replace_allowed_ips, allowed_ip
	peer   device.NoisePublicKey
	prefix netip.Prefix // allowed_ip: masked
	del    bool         // allowed_ip=-prefix
}

// allowedEdit is an io.Writer that reads a UAPI set body as wireguard-go
// reads it (io.TeeReader), up to its blank line, and keeps the lines
// that move allowed IPs (ops). unfollowed marks a body whose effect on
// the allowed IPs it does not model: a device key other than listen_port
// and fwmark (private_key may remove the peer of its public key,
// replace_peers removes all), or a line it cannot parse (over
// maxEditLine bytes, a bad key or prefix). Single owner; Write never
// fails.
type allowedEdit struct {
	ops        []editOp
	unfollowed bool
	inPeer     bool
	done       bool
	line       []byte
}

// Write takes the next bytes of the body.
func (e *allowedEdit) Write(b []byte) (int, error) {
	n := len(b)
	for !e.done && len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(e.line)+len(b) > maxEditLine {
				e.unfollowed, e.done = true, true
				break
			}
			e.line = append(e.line, b...)
			break
		}
		if len(e.line)+i > maxEditLine {
			e.unfollowed, e.done = true, true
			break
		}
		e.line = append(e.line, b[:i]...)
		e.take(string(e.line))
		e.line, b = e.line[:0], b[i+1:]
	}
	return n, nil
}

// take reads one line of the body, without its newline.
func (e *allowedEdit) take(line string) {
	if line == "" {
		e.done = true
		return
	}
	key, value, _ := strings.Cut(line, "=")
	if key == "public_key" {
		e.inPeer = true
		op := editOp{key: key}
		if op.peer.FromHex(value) != nil {
			e.unfollowed = true
		}
		e.ops = append(e.ops, op)
		return
	}
	if !e.inPeer {
		if key != "listen_port" && key != "fwmark" {
			e.unfollowed = true
		}
		return
	}
	switch key {
	case "update_only", "remove", "replace_allowed_ips":
		e.ops = append(e.ops, editOp{key: key})
	case "allowed_ip":
		op := editOp{key: key}
		value, op.del = strings.CutPrefix(value, "-")
		p, err := netip.ParsePrefix(value)
		if err != nil {
			e.unfollowed = true
			return
		}
		op.prefix = p.Masked()
		e.ops = append(e.ops, op)
	}
}
