package chachapoly

import (
	"crypto/cipher"
	"encoding/binary"

	"golang.org/x/crypto/chacha20poly1305"
)

// nonce returns the RFC 8439 nonce for counter: 32 zero bits, then the
// counter little-endian (WireGuard whitepaper §5.4.6).
func nonce(p *Packet) (n [chacha20poly1305.NonceSize]byte) {
	binary.LittleEndian.PutUint32(n[:], p.nonce0)
	binary.LittleEndian.PutUint64(n[4:], p.Counter)
	return n
}

// aeadOf returns the x/crypto AEAD of k, making a temporary one if k was set
// while another implementation was active (only tests switch), which the
// caller erases (wipeAEAD) after use: temp true.
func aeadOf(k *Key) (a cipher.AEAD, temp bool) {
	if k.aead != nil {
		return k.aead.AEAD, false
	}
	var b [KeySize]byte
	k.bytes(&b)
	a = newAEAD(&b)
	clear(b[:])
	return a, true
}

func sealGeneric(pkts []Packet) {
	for i := range pkts {
		p := &pkts[i]
		p.nonce = nonce(p)
		m := len(p.Data) - TagSize
		a, temp := aeadOf(p.Key)
		a.Seal(p.Data[:0], p.nonce[:], p.Data[:m], p.AD)
		if temp {
			wipeAEAD(a)
		}
	}
}

func openGeneric(pkts []Packet, ok []bool) {
	for i := range pkts {
		p := &pkts[i]
		p.nonce = nonce(p)
		a, temp := aeadOf(p.Key)
		_, err := a.Open(p.Data[:0], p.nonce[:], p.Data, p.AD)
		ok[i] = err == nil
		if temp {
			wipeAEAD(a)
		}
	}
}
