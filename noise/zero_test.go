package noise

import (
	"testing"
)

// TestZeroing: key material the package holds is zeroed when discarded.
func TestZeroing(t *testing.T) {
	kI, _ := NewPrivateKey()
	kR, _ := NewPrivateKey()
	idI := NewStaticIdentity(kI, nil)
	idR := NewStaticIdentity(kR, nil)
	psk, _ := NewPresharedKey()
	hI := NewHandshake(idI, idR.PublicKey(), psk)
	hR := NewHandshake(idR, idI.PublicKey(), psk)
	var m [InitiationSize]byte
	var r [ResponseSize]byte
	if err := hI.CreateInitiation(&m, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := idR.ConsumeInitiation(m[:], func(PublicKey) *Handshake { return hR }); err != nil {
		t.Fatal(err)
	}
	if err := hR.CreateResponse(&r, 2); err != nil {
		t.Fatal(err)
	}
	if err := hI.ConsumeResponse(r[:]); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*Handshake{hI, hR} {
		if _, err := h.DeriveKeys(); err != nil {
			t.Fatal(err)
		}
		if !isZero(h.chainKey[:]) || !isZero(h.hash[:]) || !h.localEphemeral.IsZero() || h.ephemeral != nil || !isZero(h.remoteEphemeral[:]) {
			t.Errorf("after DeriveKeys: chaining key, hash or ephemeral keys not zero")
		}
		h.Zero()
		if !h.psk.IsZero() || !isZero(h.staticStatic[:]) || !isZero(h.cookies.cookie[:]) {
			t.Errorf("after Zero: psk, static-static or cookie not zero")
		}
	}
	var reply [CookieReplySize]byte
	if err := idR.checker.CreateReply(&reply, m[:], netipAddrPortForTest); err != nil {
		t.Fatal(err)
	}
	idR.Zero()
	if !idR.private.IsZero() || idR.scalar != nil || !isZero(idR.checker.secret[:]) {
		t.Errorf("after StaticIdentity.Zero: private key or cookie secret not zero")
	}
	// A zeroed identity refuses handshakes instead of using a zero key.
	var m2 [InitiationSize]byte
	if err := NewHandshake(idR, idI.PublicKey(), PresharedKey{}).CreateInitiation(&m2, 3); err == nil {
		t.Errorf("CreateInitiation with a zeroed identity succeeded")
	}
}
