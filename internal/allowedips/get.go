package allowedips

import (
	"bytes"
	"fmt"
	"net/netip"

	"golang.zx2c4.com/wireguard/device"
)

// GetWriter is an io.Writer that reads a UAPI get reply written to it
// (wireguard-go's IpcGetOperation: one key=value a line) into Peers, line
// by line as they come, without keeping the reply (tens of MB with many
// peers). Result ends the last line. The zero value is ready; single
// owner; Write never fails.
type GetWriter struct {
	peers   *Peers
	ends    map[device.NoisePublicKey]struct{} // peers with an endpoint= line
	cur     device.NoisePublicKey
	inPeer  bool
	err     error
	partial []byte // the start of a line cut between writes
}

// Write takes the next bytes of the reply.
func (w *GetWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			w.partial = append(w.partial, b...)
			break
		}
		line := b[:i]
		if len(w.partial) > 0 {
			w.partial = append(w.partial, line...)
			line = w.partial
		}
		w.take(line)
		w.partial = w.partial[:0]
		b = b[i+1:]
	}
	return n, nil
}

// take reads one line of the reply, without its newline.
func (w *GetWriter) take(line []byte) {
	if w.peers == nil {
		w.peers = NewPeers(0)
	}
	if v, ok := bytes.CutPrefix(line, []byte("public_key=")); ok {
		if err := w.cur.FromHex(string(v)); err != nil && w.err == nil {
			w.err = fmt.Errorf("public_key %q: %w", v, err)
		}
		w.inPeer = true
		w.peers.AddPeer(w.cur)
		return
	}
	if bytes.HasPrefix(line, []byte("endpoint=")) && w.inPeer {
		if w.ends == nil {
			w.ends = make(map[device.NoisePublicKey]struct{})
		}
		w.ends[w.cur] = struct{}{}
		return
	}
	if v, ok := bytes.CutPrefix(line, []byte("allowed_ip=")); ok {
		p, err := netip.ParsePrefix(string(v))
		switch {
		case err != nil:
			if w.err == nil {
				w.err = fmt.Errorf("allowed_ip %q: %w", v, err)
			}
		case !w.inPeer:
			if w.err == nil {
				w.err = fmt.Errorf("allowed_ip %q before a public_key", v)
			}
		default:
			w.peers.Allow(w.cur, p)
		}
	}
}

// Result takes a last line without its newline and returns the peers read,
// and the first line it could not read (a bad public_key or allowed_ip,
// an allowed_ip outside a peer): the peers are those of the lines read.
func (w *GetWriter) Result() (*Peers, error) {
	if len(w.partial) > 0 {
		w.take(w.partial)
		w.partial = w.partial[:0]
	}
	if w.peers == nil {
		w.peers = NewPeers(0)
	}
	return w.peers, w.err
}

// HasEndpoint reports whether the reply gave peer k an endpoint (an
// endpoint= line: wireguard-go writes one for a peer once it has one).
func (w *GetWriter) HasEndpoint(k device.NoisePublicKey) bool {
	_, ok := w.ends[k]
	return ok
}
