// Command soakflood sends WireGuard handshake initiations to a gateway at a
// fixed rate for a while: the handshake flood of scripts/soak.sh. It is a
// test tool, run by that script only, against addresses of the soak's own
// network namespaces.
//
// Three kinds of initiation, taken in turn (section 5.4.2 of the
// WireGuard whitepaper; MACs of section 5.4.4):
//   - from static keys the gateway does not know, with a valid MAC1 (made
//     once, 256 of them, then sent again and again): each costs the
//     gateway a Curve25519 operation before it is refused, and under load
//     a cookie reply (section 5.4.7);
//   - 148 random bytes of type 1 (a MAC1 that fails: the cheap refusal);
//   - with -known, fresh initiations from that private key, one of the
//     gateway's peers: each completes a handshake on the gateway, whose
//     response nobody answers.
//
// Usage:
//
//	soakflood -to 198.18.0.1:51820 -pub GATEWAYKEY [-known PRIVKEY] -rate 2000 -duration 60s
//
// It sends from 16 sockets (16 source ports) and prints what it sent.
package main

import (
	"crypto/rand"
	"flag"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/wgpio/wgpio/noise"
)

func main() {
	to := flag.String("to", "", "the gateway's WireGuard address:port")
	pubText := flag.String("pub", "", "the gateway's public key (base64)")
	knownText := flag.String("known", "", "private key (base64) of one of the gateway's peers: also send its fresh initiations")
	rate := flag.Int("rate", 1000, "initiations per second, all kinds together")
	dur := flag.Duration("duration", time.Minute, "how long to send")
	flag.Parse()
	if err := run(*to, *pubText, *knownText, *rate, *dur); err != nil {
		log.Fatal("soakflood: ", err)
	}
}

func run(to, pubText, knownText string, rate int, dur time.Duration) error {
	if rate <= 0 {
		return fmt.Errorf("-rate %d: want 1 or more", rate)
	}
	dst, err := net.ResolveUDPAddr("udp", to)
	if err != nil {
		return err
	}
	pub, err := noise.ParsePublicKey(pubText)
	if err != nil {
		return err
	}
	unknown, err := unknownInitiations(pub, 256)
	if err != nil {
		return err
	}
	var known *noise.Handshake
	if knownText != "" {
		priv, err := noise.ParsePrivateKey(knownText)
		if err != nil {
			return err
		}
		known = noise.NewHandshake(noise.NewStaticIdentity(priv, time.Now), pub, noise.PresharedKey{})
	}
	var conns []*net.UDPConn
	for range 16 {
		c, err := net.DialUDP("udp", nil, dst)
		if err != nil {
			return err
		}
		defer c.Close()
		conns = append(conns, c)
	}

	var sentUnknown, sentRandom, sentKnown, failed int
	var msg [noise.InitiationSize]byte
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	perTick := max(rate/100, 1)
	lastKnown := time.Time{}
	end := time.Now().Add(dur)
	for i := 0; time.Now().Before(end); <-tick.C {
		for range perTick {
			var b []byte
			switch {
			case known != nil && time.Since(lastKnown) >= 25*time.Millisecond:
				// Just above the gateway's per-peer initiation rate limit
				// (protocol HandshakeInitiationRate, 20 ms).
				lastKnown = time.Now()
				if err := known.CreateInitiation(&msg, uint32(i)); err != nil {
					return err
				}
				b = msg[:]
				sentKnown++
			case i%4 == 3:
				rand.Read(msg[:])
				msg[0], msg[1], msg[2], msg[3] = 1, 0, 0, 0
				b = msg[:]
				sentRandom++
			default:
				b = unknown[i%len(unknown)][:]
				sentUnknown++
			}
			if _, err := conns[i%len(conns)].Write(b); err != nil {
				failed++
			}
			i++
		}
	}
	fmt.Printf("soakflood: sent %d unknown-key, %d random, %d known-key initiations; %d sends failed\n",
		sentUnknown, sentRandom, sentKnown, failed)
	return nil
}

// unknownInitiations makes n initiations to pub from n fresh static keys.
func unknownInitiations(pub noise.PublicKey, n int) ([][noise.InitiationSize]byte, error) {
	out := make([][noise.InitiationSize]byte, n)
	for i := range out {
		priv, err := noise.NewPrivateKey()
		if err != nil {
			return nil, err
		}
		h := noise.NewHandshake(noise.NewStaticIdentity(priv, time.Now), pub, noise.PresharedKey{})
		if err := h.CreateInitiation(&out[i], uint32(i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}
