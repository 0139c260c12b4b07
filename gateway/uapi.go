package gateway

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.zx2c4.com/wireguard/ipc"

	"github.com/wgpio/wgpio/internal/uapiserve"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/protocol"
)

// UAPIError is an error of the configuration protocol: Code is the negative
// errno the reply's "errno=" line carries (ipc.IpcError* constants).
type UAPIError struct {
	Code int64
	Err  error
}

func (e *UAPIError) Error() string { return fmt.Sprintf("uapi: errno %d: %v", e.Code, e.Err) }

// Unwrap returns the underlying error.
func (e *UAPIError) Unwrap() error { return e.Err }

func uapiErrorf(code int64, format string, args ...any) *UAPIError {
	return &UAPIError{Code: code, Err: fmt.Errorf(format, args...)}
}

// IpcGet writes the device's configuration and state in the "get=1" format
// of the configuration protocol (https://www.wireguard.com/xplatform/), the
// fields and their order as wireguard-go prints them: private_key,
// listen_port, fwmark, then per peer public_key, preshared_key,
// protocol_version, endpoint, last_handshake_time_sec/_nsec, tx_bytes,
// rx_bytes, persistent_keepalive_interval, allowed_ip. Keys are lowercase
// hex. It does not write the terminating "errno=" line.
func (d *Device) IpcGet(w io.Writer) error { return d.ipcGet(w, nil) }

// ipcGet is IpcGet; h, when not nil, is the room the UAPI socket took for
// the reply in d.getReplies, told the size of the buffer it is formatted in.
func (d *Device) ipcGet(w io.Writer, h *uapiserve.Hold) error {
	// Formatted with appends into one buffer (about 350 bytes a peer), in
	// about a microsecond a peer: fmt would take several.
	d.mu.RLock()
	b := d.replyBufs.get(d.getReplySizeLocked(), time.Now())
	if !d.private.IsZero() {
		b = append(b, "private_key="...)
		b = hex.AppendEncode(b, d.private[:])
		b = append(b, '\n')
	}
	if d.listenPort != 0 {
		b = appendUint(b, "listen_port=", uint64(d.listenPort))
	}
	if d.fwmark != 0 {
		b = appendUint(b, "fwmark=", uint64(d.fwmark))
	}
	for p := range d.peers.All {
		b = append(b, "public_key="...)
		b = hex.AppendEncode(b, p.pub[:])
		b = append(b, "\npreshared_key="...)
		b = hex.AppendEncode(b, p.psk[:])
		b = append(b, "\nprotocol_version=1\n"...)
		if ep := p.fp.Endpoint.Load(); ep != nil {
			b = append(b, "endpoint="...)
			b = ep.Dst.AppendTo(b)
			b = append(b, '\n')
		}
		var sec, nsec int64
		if ns := p.lastHSWall.Load(); ns != 0 {
			sec, nsec = ns/int64(time.Second), ns%int64(time.Second)
		}
		b = append(b, "last_handshake_time_sec="...)
		b = append(strconv.AppendInt(b, sec, 10), "\nlast_handshake_time_nsec="...)
		b = append(strconv.AppendInt(b, nsec, 10), '\n')
		b = appendUint(b, "tx_bytes=", p.fp.TxBytes.Load())
		b = appendUint(b, "rx_bytes=", p.fp.RxBytes.Load())
		b = appendUint(b, "persistent_keepalive_interval=", uint64(p.keepalive))
		for pfx := range p.allowed.All {
			b = append(b, "allowed_ip="...)
			b = pfx.AppendTo(b)
			b = append(b, '\n')
		}
	}
	d.mu.RUnlock()
	if h != nil {
		d.getReplies.Resize(h, cap(b))
	}
	_, err := w.Write(b)
	// The dump holds the private and preshared keys in hex: erased before
	// the buffer waits for the next get.
	clear(b)
	d.replyBufs.put(b)
	if err != nil {
		return uapiErrorf(ipc.IpcErrorIO, "write get reply: %w", err)
	}
	return nil
}

// getReplySize is about the size of IpcGet's reply now, in bytes (an
// upper bound for peers with up to 8 allowed IPs).
func (d *Device) getReplySize() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.getReplySizeLocked()
}

func (d *Device) getReplySizeLocked() int { return 64 + 400*d.peers.Len() + 48*len(d.allowed) }

// appendUint appends key (which ends in '='), v in decimal and a newline.
func appendUint(b []byte, key string, v uint64) []byte {
	b = append(b, key...)
	b = strconv.AppendUint(b, v, 10)
	return append(b, '\n')
}

// setState is the peer a "set=1" operation is on.
type setState struct {
	p       *peer // nil: device lines, or a dummy peer (lines are parsed, not applied)
	onPeer  bool  // a public_key line was seen
	created bool
	pkaOn   bool
	changed bool // allowed IPs or peers changed: publish
	toKick  []*peer
	moved   bool // the listen port moved: tell the peers (finishSetLocked)
	// later is the part of the change the dataplane left to do once
	// d.mu is released (publishLaterLocked), set by finishSetLocked;
	// finishSet calls it.
	later func() error
}

// IpcSet applies a "set=1" operation read from r up to a blank line or the
// end (https://www.wireguard.com/xplatform/), with every key wireguard-go
// accepts: device keys private_key, listen_port, fwmark, replace_peers; peer
// keys (after public_key) update_only, remove, preshared_key, endpoint,
// persistent_keepalive_interval, replace_allowed_ips, allowed_ip (a leading
// '-' removes the prefix) and protocol_version (must be 1). As in
// wireguard-go, lines apply one by one: an error stops the operation and
// what came before it stays applied. The error is a *UAPIError.
//
// Endpoints must be numeric (IP:port or [IPv6]:port): wg(8) resolves host
// names before it talks to the socket. After Close nothing is applied and
// the error wraps net.ErrClosed. It waits for a set request of the UAPI
// socket in progress (one is applied in batches: ipcSetConn), so that the
// two do not interleave. It returns once the dataplane has done the work
// of the change it does outside the device's lock (dataplaneWaiter:
// fastgw's routes into the exception TUN), which the device's other
// callers (handshakes, timers, IpcGet) do not wait for.
func (d *Device) IpcSet(r io.Reader) (err error) {
	d.setMu.Lock()
	defer d.setMu.Unlock()
	defer d.waitApplied()
	return d.ipcSet(r)
}

// IpcUpdate reads the configuration as IpcGet prints it, hands it to
// edit, and applies the set=1 body edit returns (IpcSet), with no other
// set request (the UAPI socket's, IpcSet's) in between: a reload that
// reads the running peers to compute what to remove, then sets, while
// `wg addconf` added 4,000 peers, removed most of those and kept the
// rest. An error of edit is returned as it is, and nothing is applied.
func (d *Device) IpcUpdate(edit func(running string) (string, error)) error {
	d.setMu.Lock()
	defer d.setMu.Unlock()
	var b strings.Builder
	if err := d.IpcGet(&b); err != nil {
		return err
	}
	body, err := edit(b.String())
	if err != nil {
		return err
	}
	defer d.waitApplied()
	return d.ipcSet(strings.NewReader(body))
}

// ipcSet is IpcSet, setMu held.
func (d *Device) ipcSet(r io.Reader) (err error) {
	var st setState
	defer func() { // once d.mu is released
		if ferr := d.finishSet(&st); err == nil {
			err = ferr
		}
	}()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed() {
		return uapiErrorf(ipc.IpcErrorIO, "%w", errDeviceClosed)
	}
	defer func() {
		if ferr := d.finishSetLocked(&st); err == nil {
			err = ferr
		}
	}()
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, uapiMaxLine)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			return nil
		}
		if err := d.setLineLocked(&st, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return errLineTooLong
		}
		return uapiErrorf(ipc.IpcErrorIO, "read set request: %w", err)
	}
	return nil
}

// setLineLocked applies one line of a set=1 request (without its newline).
func (d *Device) setLineLocked(st *setState, line string) error {
	key, value, ok := strings.Cut(line, "=")
	if !ok {
		return uapiErrorf(ipc.IpcErrorProtocol, "parse line %q", line)
	}
	if key == "public_key" {
		d.postPeerLocked(st)
		k, err := noise.ParsePublicKeyHex(value)
		if err != nil {
			return uapiErrorf(ipc.IpcErrorInvalid, "parse public_key: %w", err)
		}
		st.onPeer = true
		st.p, st.created = d.lookupOrCreateLocked(k)
		st.pkaOn = false
		if st.created {
			st.changed = true
		}
		return nil
	}
	if !st.onPeer {
		return d.setDeviceLineLocked(st, key, value)
	}
	return d.setPeerLineLocked(st, key, value)
}

// postPeerLocked finishes the lines of one peer: a persistent keepalive
// just turned on sends a keepalive at once (wireguard-go).
func (d *Device) postPeerLocked(st *setState) {
	if st.p != nil && st.pkaOn {
		st.toKick = append(st.toKick, st.p)
	}
	st.p, st.pkaOn, st.created = nil, false, false
}

// finishSetLocked publishes what the request changed and sends the
// keepalives it asked for; the part of the change the dataplane left to
// do (st.later) is finishSet's, once d.mu is released. A dataplane that
// could not take the whole configuration (which the control plane and
// the engine hold) is reported to the client: errno is the system error's
// (ENOSPC for a full LAN prefix map), else EIO.
func (d *Device) finishSetLocked(st *setState) error {
	d.postPeerLocked(st)
	var err error
	if st.changed {
		var perr error
		st.later, perr = d.publishLaterLocked()
		err = dataplaneUAPIError(perr)
	}
	// Before Start, Start sends them (keepalivesAtStart), as wireguard-go
	// sends them only on a device that is up.
	now := d.now()
	for _, p := range st.toKick {
		if d.started.Load() && d.byFP[p.fp] == p {
			d.sendKeepaliveLocked(p, now)
		}
	}
	if st.moved && d.started.Load() {
		d.tellMovedLocked(now)
	}
	return err
}

// finishSet does the part of the request's change that the dataplane
// left to do (st.later, from finishSetLocked), d.mu not held, and returns
// its error as finishSetLocked returns the dataplane's.
func (d *Device) finishSet(st *setState) error {
	if st.later == nil {
		return nil
	}
	later := st.later
	st.later = nil
	return dataplaneUAPIError(later())
}

// dataplaneUAPIError is err, a change's error of the dataplane, for a
// set's client (nil if nil): errno the system error's, else EIO.
func dataplaneUAPIError(err error) error {
	if err == nil {
		return nil
	}
	code := int64(ipc.IpcErrorIO)
	var errno syscall.Errno
	if errors.As(err, &errno) {
		code = -int64(errno)
	}
	return &UAPIError{Code: code, Err: err}
}

// tellMovedLocked sends a keepalive from the new listen port to every peer
// with a session it may still send with and an endpoint, so that each
// follows the port at once (its endpoint moves on an authenticated
// packet from a new source, whitepaper §2.1) rather than at our next data
// for it: where only the peer sends, its packets went to the old port,
// refused, until its handshake retried after 15 s. Linux and wireguard-go
// send nothing then. A mailbox that refuses one is counted (mailbox_full);
// that peer follows at the next packet. d.mu held.
func (d *Device) tellMovedLocked(now int64) {
	for _, p := range d.byKey {
		kp, ep := p.fp.Current.Load(), p.fp.Endpoint.Load()
		if kp == nil || kp.Dead() || ep == nil || now-kp.Created >= int64(protocol.RejectAfterTime) {
			continue
		}
		d.sendKeepaliveLocked(p, now)
	}
}

func (d *Device) setDeviceLineLocked(st *setState, key, value string) error {
	switch key {
	case "private_key":
		var k noise.PrivateKey
		if value != "" && strings.Trim(value, "0") != "" {
			var err error
			if k, err = noise.ParsePrivateKeyHex(value); err != nil {
				return uapiErrorf(ipc.IpcErrorInvalid, "set private_key: %w", err)
			}
			// wireguard-go clamps a key set over the UAPI (RFC 7748 §5), and
			// get=1 prints it clamped.
			k.Clamp()
		} else if len(value) != 2*noise.KeySize {
			return uapiErrorf(ipc.IpcErrorInvalid, "set private_key: %w", noise.ErrKeyFormat)
		}
		d.setPrivateKeyLocked(k)
		st.changed = true
	case "listen_port":
		port, err := strconv.ParseUint(value, 10, 16)
		if err != nil {
			return uapiErrorf(ipc.IpcErrorInvalid, "parse listen_port: %w", err)
		}
		if move := d.opts.SetListenPort; move != nil {
			if uint16(port) == d.listenPort && port != 0 {
				return nil // wg setconf and syncconf send the same port again
			}
			got, err := move(uint16(port))
			if err != nil {
				code := int64(ipc.IpcErrorIO)
				var errno syscall.Errno
				if errors.As(err, &errno) {
					code = -int64(errno)
				}
				return &UAPIError{Code: code, Err: fmt.Errorf("set listen_port %d: %w", port, err)}
			}
			d.log.Info("listen port changed", "from", d.listenPort, "to", got)
			d.listenPort, st.moved = got, true
			return nil
		}
		// A dataplane whose port is fixed when it starts (an XDP
		// program and sockets): the same value (wg setconf and syncconf
		// send it) is accepted, another refused rather than recorded and
		// ignored.
		if d.opts.FixedListenPort && d.listenPort != 0 && uint16(port) != d.listenPort {
			return uapiErrorf(-int64(syscall.EOPNOTSUPP), "listen_port %d: the gateway listens on %d, fixed at start (restart it with another ListenPort)", port, d.listenPort)
		}
		d.listenPort = uint16(port)
	case "fwmark":
		mark, err := strconv.ParseUint(value, 10, 32)
		if err != nil {
			return uapiErrorf(ipc.IpcErrorInvalid, "parse fwmark: %w", err)
		}
		d.fwmark = uint32(mark)
	case "replace_peers":
		if value != "true" {
			return uapiErrorf(ipc.IpcErrorInvalid, "set replace_peers: invalid value %q", value)
		}
		d.removeAllPeersLocked()
		st.changed = true
	case "set", "get":
		// The operation's own line, which the UAPI socket reads before
		// the body (ServeUAPI): a Go caller of IpcSet who copied a whole
		// request, as the protocol's page shows one, is told so, not just
		// that the key is invalid (wireguard-go's IpcSet refuses it too).
		return uapiErrorf(ipc.IpcErrorInvalid, "invalid device key %q: IpcSet takes the body of a set=1 operation, without its %s=1 line (config.File.UAPI's form)", key, key)
	default:
		return uapiErrorf(ipc.IpcErrorInvalid, "invalid device key %q", key)
	}
	return nil
}

func (d *Device) setPeerLineLocked(st *setState, key, value string) error {
	p := st.p // nil: a dummy (our own key, removed, or update_only)
	switch key {
	case "update_only":
		if value != "true" {
			return uapiErrorf(ipc.IpcErrorInvalid, "set update_only: invalid value %q", value)
		}
		if st.created && p != nil {
			d.removePeerLocked(p)
			st.p = nil
		}
	case "remove":
		if value != "true" {
			return uapiErrorf(ipc.IpcErrorInvalid, "set remove: invalid value %q", value)
		}
		if p != nil {
			d.removePeerLocked(p)
			st.changed = true
		}
		st.p = nil
	case "preshared_key":
		k, err := noise.ParsePresharedKeyHex(value)
		if err != nil {
			return uapiErrorf(ipc.IpcErrorInvalid, "set preshared_key: %w", err)
		}
		if p != nil {
			d.setPSKLocked(p, k)
		}
	case "endpoint":
		ap, err := netip.ParseAddrPort(value)
		if err != nil {
			return uapiErrorf(ipc.IpcErrorInvalid, "set endpoint %q: %w", value, err)
		}
		if z := ap.Addr().Zone(); z != "" {
			// The fast path sends every packet out of the WAN port: a
			// zone naming it (by name or index) says nothing more and is
			// dropped; any other interface cannot be honoured.
			if !d.isWANZone(z) { // logged with the request's refusal (warnUAPI)
				return uapiErrorf(ipc.IpcErrorInvalid, "set endpoint %q: zone %q is not the WAN interface %q, the only one the fast path sends on", value, z, d.opts.WANInterface)
			}
			ap = netip.AddrPortFrom(ap.Addr().WithZone(""), ap.Port())
		}
		if p != nil {
			d.setEndpointConfigLocked(p, ap)
		}
	case "persistent_keepalive_interval":
		secs, err := strconv.ParseUint(value, 10, 16)
		if err != nil {
			return uapiErrorf(ipc.IpcErrorInvalid, "set persistent_keepalive_interval: %w", err)
		}
		if p != nil {
			st.pkaOn = d.setKeepaliveLocked(p, uint16(secs))
		}
	case "replace_allowed_ips":
		if value != "true" {
			return uapiErrorf(ipc.IpcErrorInvalid, "set replace_allowed_ips: invalid value %q", value)
		}
		if p != nil {
			d.clearAllowedLocked(p)
			st.changed = true
		}
	case "allowed_ip":
		remove := strings.HasPrefix(value, "-")
		pfx, err := netip.ParsePrefix(strings.TrimPrefix(value, "-"))
		if err != nil {
			return uapiErrorf(ipc.IpcErrorInvalid, "set allowed_ip: %w", err)
		}
		if p == nil {
			return nil
		}
		if remove {
			d.removeAllowedLocked(p, pfx)
		} else {
			d.addAllowedLocked(p, pfx)
		}
		st.changed = true
	case "protocol_version":
		if value != "1" {
			return uapiErrorf(ipc.IpcErrorInvalid, "invalid protocol_version %q", value)
		}
	default:
		return uapiErrorf(ipc.IpcErrorInvalid, "invalid peer key %q", key)
	}
	return nil
}

// isWANZone reports whether an IPv6 zone names the WAN interface.
func (d *Device) isWANZone(z string) bool {
	if d.opts.WANInterface != "" && z == d.opts.WANInterface {
		return true
	}
	return d.opts.WANIndex > 0 && z == strconv.Itoa(d.opts.WANIndex)
}

// logStart is what a log line quotes of a client's line: its first 64
// bytes. An operation line may be up to 64 KiB, and each connection that
// sends an unknown one is logged.
func logStart(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
