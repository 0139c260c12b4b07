//go:build linux

package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
)

// wgPeers reads the peers of a compat mode's stock wireguard-go device
// through its UAPI get operation (device.Device.IpcGetOperation: the
// text `wg show` reads, key=value lines, a peer from each public_key),
// for `wgpio stats -json` and the metrics (wgpio_peers, wgpio_peer_*).
// Each read formats every peer under wireguard-go's own locks, as a `wg
// show` does: one at a time (mu), and the metrics read no more than
// MetricsPeers of them into PeerStats.
type wgPeers struct {
	mu  sync.Mutex
	get func(io.Writer) error
}

// read returns how many peers the device has and the first max of them
// (every one when max < 0), in the order the device lists them (its map's:
// not the same from one read to the next); an error of the get
// operation, or a line it cannot parse, fails it.
func (r *wgPeers) read(max int) ([]PeerStat, int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := uapiPeerParser{max: max}
	if err := r.get(&p); err != nil {
		return nil, 0, err
	}
	if err := p.Close(); err != nil {
		return nil, 0, err
	}
	return p.peers, p.n, nil
}

// uapiPeerParser is an io.Writer of a UAPI get operation's output that
// keeps its peers' keys, endpoints, last handshakes and byte counts
// (cross-platform UAPI, wireguard.com/xplatform: public_key in hex starts
// a peer; last_handshake_time_sec and _nsec, 0 and 0 for none; rx_bytes,
// tx_bytes). The lines before the first peer are the interface's.
type uapiPeerParser struct {
	max     int // peers to keep (< 0: all)
	n       int // peers seen
	peers   []PeerStat
	hsSec   int64 // the current peer's last handshake
	hsNsec  int64
	partial []byte // a line not yet ended
	err     error
}

func (p *uapiPeerParser) Write(b []byte) (int, error) {
	n := len(b)
	for p.err == nil && len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.partial = append(p.partial, b...)
			break
		}
		if len(p.partial) > 0 {
			p.partial = append(p.partial, b[:i]...)
			p.line(p.partial)
			p.partial = p.partial[:0]
		} else {
			p.line(b[:i])
		}
		b = b[i+1:]
	}
	return n, p.err
}

// Close ends the output: a last line without its newline, and the last
// peer's handshake.
func (p *uapiPeerParser) Close() error {
	if len(p.partial) > 0 {
		p.line(p.partial)
	}
	p.endPeer()
	return p.err
}

// kept is the peer being read when it is one of those kept, else nil.
func (p *uapiPeerParser) kept() *PeerStat {
	if p.n == 0 || len(p.peers) < p.n {
		return nil
	}
	return &p.peers[p.n-1]
}

// endPeer sets the kept peer's last handshake from its two lines.
func (p *uapiPeerParser) endPeer() {
	if ps := p.kept(); ps != nil && (p.hsSec != 0 || p.hsNsec != 0) {
		ps.LastHandshake = time.Unix(p.hsSec, p.hsNsec)
	}
	p.hsSec, p.hsNsec = 0, 0
}

func (p *uapiPeerParser) line(l []byte) {
	key, value, ok := bytes.Cut(l, []byte{'='})
	if !ok {
		return // the empty line that ends the output
	}
	if string(key) == "public_key" {
		p.endPeer()
		k, err := hex.DecodeString(string(value))
		if err != nil || len(k) != 32 {
			p.err = fmt.Errorf("UAPI get: public_key %q: not 32 bytes of hex", value)
			return
		}
		p.n++
		if p.max < 0 || len(p.peers) < p.max {
			p.peers = append(p.peers, PeerStat{PublicKey: base64.StdEncoding.EncodeToString(k)})
		}
		return
	}
	ps := p.kept()
	if ps == nil {
		return // the interface's lines, or a peer not kept
	}
	var err error
	switch string(key) {
	case "endpoint":
		ps.Endpoint = string(value)
	case "last_handshake_time_sec":
		p.hsSec, err = strconv.ParseInt(string(value), 10, 64)
	case "last_handshake_time_nsec":
		p.hsNsec, err = strconv.ParseInt(string(value), 10, 64)
	case "rx_bytes":
		ps.RxBytes, err = strconv.ParseUint(string(value), 10, 64)
	case "tx_bytes":
		ps.TxBytes, err = strconv.ParseUint(string(value), 10, 64)
	}
	if err != nil {
		p.err = fmt.Errorf("UAPI get: %s: %w", key, err)
	}
}
