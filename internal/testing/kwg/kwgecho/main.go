// Copied from shared/tools/kwg/go/cmd/kwgecho (see ../README.md).
//
// kwgecho: tiny static TCP+UDP echo server that runs inside the qemu guest.
// It listens on 0.0.0.0:PORT (default 7) so it survives wg0 being deleted and
// re-created by the control channel.
package main

import (
	"flag"
	"io"
	"log"
	"net"
)

func main() {
	port := flag.String("port", "7", "TCP and UDP port")
	flag.Parse()
	addr := net.JoinHostPort("0.0.0.0", *port)

	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		log.Fatalf("kwgecho: tcp listen: %v", err)
	}
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		log.Fatalf("kwgecho: udp listen: %v", err)
	}
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				log.Printf("kwgecho: udp read: %v", err)
				continue
			}
			if _, err := pc.WriteTo(buf[:n], from); err != nil {
				log.Printf("kwgecho: udp write: %v", err)
			}
		}
	}()
	log.Printf("kwgecho: listening on tcp/udp %s", addr)
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Printf("kwgecho: accept: %v", err)
			continue
		}
		go func(c net.Conn) {
			defer c.Close()
			io.Copy(c, c)
		}(c)
	}
}
