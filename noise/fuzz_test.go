package noise_test

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/noise"
)

// isDrop reports whether err is nil or a DropReason, the only errors wire
// input may produce.
func isDrop(err error) bool {
	var r noise.DropReason
	return err == nil || errors.As(err, &r)
}

func FuzzConsumeInitiation(f *testing.F) {
	p := newPair(f, noise.PresharedKey{})
	good := p.initiation(f, 1)
	f.Add(good)                                                              // valid: accepted once, then a replay
	f.Add(good[:noise.InitiationSize-1])                                     // one byte short
	f.Add(make([]byte, noise.InitiationSize))                                // right size, type 0
	f.Add(append([]byte{1, 0, 0, 0}, good[4:noise.InitiationOffsetMAC1]...)) // truncated before MAC1
	bad := bytes.Clone(good)
	bad[noise.InitiationOffsetMAC1] ^= 0xff
	f.Add(bad) // bad MAC1
	f.Fuzz(func(t *testing.T, msg []byte) {
		p.clock.Advance(noise.HandshakeInitiationRate + 1)
		h, err := p.idR.ConsumeInitiation(msg, p.lookupR)
		if !isDrop(err) {
			t.Fatalf("ConsumeInitiation error %v is not a DropReason", err)
		}
		if (err == nil) != (h == p.hsR) {
			t.Fatalf("ConsumeInitiation = %p, %v", h, err)
		}
	})
}

func FuzzConsumeResponse(f *testing.F) {
	p := newPair(f, noise.PresharedKey{})
	if _, err := p.idR.ConsumeInitiation(p.initiation(f, 1), p.lookupR); err != nil {
		f.Fatal(err)
	}
	var resp [noise.ResponseSize]byte
	if err := p.hsR.CreateResponse(&resp, 2); err != nil {
		f.Fatal(err)
	}
	f.Add(resp[:])                                                           // valid for the first run
	f.Add(resp[:noise.ResponseSize-1])                                       // short
	f.Add(make([]byte, noise.ResponseSize))                                  // type 0
	f.Add(append([]byte{2, 0, 0, 0}, make([]byte, noise.ResponseSize-4)...)) // zero MAC1
	f.Fuzz(func(t *testing.T, msg []byte) {
		if p.hsI.State() != noise.StateInitiationCreated {
			p.initiation(t, 1)
		}
		if err := p.hsI.ConsumeResponse(msg); !isDrop(err) {
			t.Fatalf("ConsumeResponse error %v is not a DropReason", err)
		}
	})
}

func FuzzConsumeCookieReply(f *testing.F) {
	p := newPair(f, noise.PresharedKey{})
	m := p.initiation(f, 1)
	var reply [noise.CookieReplySize]byte
	if err := p.idR.CookieChecker().CreateReply(&reply, m, p.initiatorSrc); err != nil {
		f.Fatal(err)
	}
	f.Add(reply[:])                                                             // valid: answers our last MAC1
	f.Add(reply[:noise.CookieReplySize-1])                                      // short
	f.Add(make([]byte, noise.CookieReplySize))                                  // type 0
	f.Add(append([]byte{3, 0, 0, 0}, make([]byte, noise.CookieReplySize-4)...)) // forged
	f.Fuzz(func(t *testing.T, msg []byte) {
		if err := p.hsI.ConsumeCookieReply(msg); !isDrop(err) {
			t.Fatalf("ConsumeCookieReply error %v is not a DropReason", err)
		}
	})
}

func FuzzCookieCheck(f *testing.F) {
	p := newPair(f, noise.PresharedKey{})
	init := p.initiation(f, 1)
	if _, err := p.idR.ConsumeInitiation(init, p.lookupR); err != nil {
		f.Fatal(err)
	}
	var resp [noise.ResponseSize]byte
	if err := p.hsR.CreateResponse(&resp, 2); err != nil {
		f.Fatal(err)
	}
	f.Add(init, true)              // valid initiation under load: cookie
	f.Add(init, false)             // valid initiation: accept
	f.Add(resp[:], true)           // a response goes to the initiator's checker: bad MAC1 here
	f.Add(init[:100], true)        // short
	f.Add(make([]byte, 92), false) // response size, type 0
	f.Fuzz(func(t *testing.T, msg []byte, underLoad bool) {
		for _, id := range []*noise.StaticIdentity{p.idR, p.idI} {
			v, err := id.CookieChecker().Check(msg, p.initiatorSrc, underLoad)
			if !isDrop(err) {
				t.Fatalf("Check error %v is not a DropReason", err)
			}
			if v == noise.VerdictCookie {
				var reply [noise.CookieReplySize]byte
				if err := id.CookieChecker().CreateReply(&reply, msg, netip.AddrPort{}); err != nil {
					t.Fatalf("CreateReply after VerdictCookie: %v", err)
				}
			}
		}
	})
}

func FuzzParseTransportHeader(f *testing.F) {
	f.Add([]byte{4, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) // keepalive-sized
	f.Add([]byte{4, 0, 0})                                                                                        // short
	f.Fuzz(func(t *testing.T, msg []byte) {
		r, c, ok := noise.ParseTransportHeader(msg)
		if !ok {
			return
		}
		var b [noise.TransportHeaderSize]byte
		noise.PutTransportHeader(b[:], r, c)
		if !bytes.Equal(b[:], msg[:noise.TransportHeaderSize]) {
			t.Fatalf("header round trip: % x, want % x", b, msg[:16])
		}
	})
}

func FuzzParseKey(f *testing.F) {
	f.Add(aliceB64) // RFC 7748 key, base64
	f.Add(aliceHex) // and hex
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		if k, err := noise.ParsePublicKey(s); err == nil {
			if k2, err := noise.ParsePublicKey(k.Base64()); err != nil || k2 != k {
				t.Fatalf("base64 round trip of %q", s)
			}
			// Only the canonical form parses, as in wg(8).
			if k.Base64() != s {
				t.Fatalf("ParsePublicKey(%q) took a form other than %q", s, k.Base64())
			}
		}
		if k, err := noise.ParsePublicKeyHex(s); err == nil {
			if k2, err := noise.ParsePublicKeyHex(k.Hex()); err != nil || k2 != k {
				t.Fatalf("hex round trip of %q", s)
			}
		}
	})
}

func FuzzMessageReceiver(f *testing.F) {
	f.Add([]byte{2, 0, 0, 0})                                          // response type, short
	f.Add(append([]byte{3, 0, 0, 0, 7, 0, 0, 0}, make([]byte, 56)...)) // cookie reply, receiver 7
	f.Add(append([]byte{4, 0, 0, 0, 9, 0, 0, 0}, make([]byte, 24)...)) // keepalive, receiver 9
	f.Fuzz(func(t *testing.T, msg []byte) {
		r, ok := noise.MessageReceiver(msg)
		if !ok && r != 0 {
			t.Fatalf("MessageReceiver = %d, false", r)
		}
		if ok && msg[0] == noise.TypeTransport {
			if r2, _, ok2 := noise.ParseTransportHeader(msg); !ok2 || r2 != r {
				t.Fatalf("MessageReceiver = %d, ParseTransportHeader = %d, %v", r, r2, ok2)
			}
		}
	})
}
