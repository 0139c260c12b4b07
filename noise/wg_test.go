package noise_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/noise"
	"golang.org/x/crypto/chacha20poly1305"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/conn/bindtest"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"
)

// Tunnel addresses of the test: the stock wireguard-go device is wgAddr, we
// are ourAddr (198.18.0.0/15, the benchmarking range; they never leave the
// process: the binds are channels).
var (
	wgAddr  = netip.MustParseAddr("198.18.0.1")
	ourAddr = netip.MustParseAddr("198.18.0.2")
	// wgSource stands for the device's UDP source address and port, which
	// bindtest does not have: the cookie is bound to it.
	wgSource = netip.MustParseAddrPort("198.18.1.1:51820")
)

// ourEndpoint is the device's view of us: bindtest's binds[0] sends to
// ChannelEndpoint 1 (its target4), which reaches binds[1], ours.
const ourEndpoint = "127.0.0.1:1"

// wgPeer is a stock wireguard-go device wired to us through a bindtest
// channel bind and a tuntest channel TUN.
type wgPeer struct {
	dev  *device.Device
	tun  *tuntest.ChannelTUN
	bind conn.Bind // our end
	priv noise.PrivateKey
	pub  noise.PublicKey
	rx   chan []byte // messages the device sent us
}

func newWGPeer(t testing.TB, ourPub noise.PublicKey, psk noise.PresharedKey) *wgPeer {
	t.Helper()
	priv, err := noise.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	binds := bindtest.NewChannelBinds()
	w := &wgPeer{tun: tuntest.NewChannelTUN(), bind: binds[1], priv: priv, pub: priv.PublicKey(), rx: make(chan []byte, 1024)}
	w.dev = device.NewDevice(w.tun.TUN(), binds[0], device.NewLogger(device.LogLevelSilent, ""))
	cfg := fmt.Sprintf("private_key=%s\nreplace_peers=true\npublic_key=%s\npreshared_key=%s\nendpoint=%s\nallowed_ip=%s/32\n",
		priv.Hex(), ourPub.Hex(), psk.Hex(), ourEndpoint, ourAddr)
	if err := w.dev.IpcSet(cfg); err != nil {
		t.Fatalf("IpcSet: %v", err)
	}
	if err := w.dev.Up(); err != nil {
		t.Fatalf("Up: %v", err)
	}
	fns, _, err := w.bind.Open(0)
	if err != nil {
		t.Fatalf("open our bind: %v", err)
	}
	for _, fn := range fns {
		go func() {
			bufs := [][]byte{make([]byte, 65536)}
			sizes := make([]int, 1)
			eps := make([]conn.Endpoint, 1)
			for {
				n, err := fn(bufs, sizes, eps)
				if err != nil {
					return
				}
				for i := range n {
					w.rx <- bytes.Clone(bufs[i][:sizes[i]])
				}
			}
		}()
	}
	t.Cleanup(func() {
		w.dev.Close()
		w.bind.Close()
	})
	return w
}

// send delivers msg to the device as if from us.
func (w *wgPeer) send(t testing.TB, msg []byte) {
	t.Helper()
	// binds[1].target4 is ChannelEndpoint 2: it feeds binds[0], the device's.
	if err := w.bind.Send([][]byte{msg}, bindtest.ChannelEndpoint(2)); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatalf("send to device: %v", err)
	}
}

// recv returns the next message of type typ the device sends, skipping
// others.
func (w *wgPeer) recv(t testing.TB, typ byte, timeout time.Duration) []byte {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m := <-w.rx:
			if len(m) > 0 && m[0] == typ {
				return m
			}
			t.Logf("skipping message of type %d, %d bytes", m[0], len(m))
		case <-deadline:
			t.Fatalf("no message of type %d from wireguard-go within %v", typ, timeout)
			return nil
		}
	}
}

// fromTUN returns the next packet wireguard-go delivers to its TUN.
func (w *wgPeer) fromTUN(t testing.TB) []byte {
	t.Helper()
	select {
	case p := <-w.tun.Inbound:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no packet out of wireguard-go's TUN within 5s")
		return nil
	}
}

// seal builds a transport data message by hand, from the whitepaper
// section 5.4.6 (not with our helpers): type 4, receiver, 64-bit
// little-endian counter, then ChaCha20-Poly1305 over the plaintext padded
// with zeros to a multiple of 16, nonce = 4 zero bytes || counter (LE).
func seal(t testing.TB, key [32]byte, receiver uint32, counter uint64, plain []byte) []byte {
	t.Helper()
	aead, err := chacha20poly1305.New(key[:])
	if err != nil {
		t.Fatal(err)
	}
	padded := make([]byte, (len(plain)+15)/16*16)
	copy(padded, plain)
	msg := make([]byte, 16, 16+len(padded)+16)
	msg[0] = 4
	binary.LittleEndian.PutUint32(msg[4:], receiver)
	binary.LittleEndian.PutUint64(msg[8:], counter)
	var nonce [12]byte
	binary.LittleEndian.PutUint64(nonce[4:], counter)
	return aead.Seal(msg, nonce[:], padded, nil)
}

// open decrypts a transport data message by hand and returns receiver,
// counter and the (padded) plaintext.
func open(t testing.TB, key [32]byte, msg []byte) (uint32, uint64, []byte) {
	t.Helper()
	if len(msg) < 32 || msg[0] != 4 {
		t.Fatalf("not a transport message: % x", msg)
	}
	aead, err := chacha20poly1305.New(key[:])
	if err != nil {
		t.Fatal(err)
	}
	var nonce [12]byte
	copy(nonce[4:], msg[8:16])
	plain, err := aead.Open(nil, nonce[:], msg[16:], nil)
	if err != nil {
		t.Fatalf("open transport data: %v", err)
	}
	return binary.LittleEndian.Uint32(msg[4:]), binary.LittleEndian.Uint64(msg[8:]), plain
}

// ipPacket trims a padded IPv4 plaintext to its total length.
func ipPacket(t testing.TB, p []byte) []byte {
	t.Helper()
	if len(p) < 20 || p[0]>>4 != 4 {
		t.Fatalf("not IPv4: % x", p)
	}
	n := int(binary.BigEndian.Uint16(p[2:]))
	if n > len(p) {
		t.Fatalf("IPv4 total length %d > %d", n, len(p))
	}
	return p[:n]
}
