package main

import (
	"encoding/binary"
	"io"
	"time"
)

// The classic libpcap file format (draft-ietf-opsawg-pcap, "PCAP Capture
// File Format"): a 24-byte file header, then per packet a 16-byte record
// header and the captured bytes. We write the nanosecond variant (magic
// 0xA1B23C4D) in little-endian order; readers detect the byte order from the
// magic number.
const (
	pcapMagicNano     = 0xa1b23c4d
	pcapVersionMajor  = 2
	pcapVersionMinor  = 4
	pcapFileHeaderLen = 24
	pcapRecordLen     = 16
	// linkTypeEthernet is LINKTYPE_ETHERNET (IEEE 802.3 frames; the
	// tcpdump.org link-layer header types registry).
	linkTypeEthernet = 1
)

// pcapWriter writes a pcap stream. Not safe for concurrent use.
type pcapWriter struct {
	w   io.Writer
	hdr [pcapRecordLen]byte
}

// newPCAPWriter writes the file header for frames of up to snapLen bytes.
func newPCAPWriter(w io.Writer, snapLen int) (*pcapWriter, error) {
	var h [pcapFileHeaderLen]byte
	binary.LittleEndian.PutUint32(h[0:], pcapMagicNano)
	binary.LittleEndian.PutUint16(h[4:], pcapVersionMajor)
	binary.LittleEndian.PutUint16(h[6:], pcapVersionMinor)
	// h[8:16]: reserved (formerly thiszone and sigfigs), zero.
	binary.LittleEndian.PutUint32(h[16:], uint32(snapLen))
	binary.LittleEndian.PutUint32(h[20:], linkTypeEthernet)
	if _, err := w.Write(h[:]); err != nil {
		return nil, err
	}
	return &pcapWriter{w: w}, nil
}

// writePacket writes one record: data is the captured bytes, origLen the
// frame's length on the wire.
func (p *pcapWriter) writePacket(t time.Time, data []byte, origLen int) error {
	ns := t.UnixNano()
	binary.LittleEndian.PutUint32(p.hdr[0:], uint32(ns/1e9))
	binary.LittleEndian.PutUint32(p.hdr[4:], uint32(ns%1e9))
	binary.LittleEndian.PutUint32(p.hdr[8:], uint32(len(data)))
	binary.LittleEndian.PutUint32(p.hdr[12:], uint32(origLen))
	if _, err := p.w.Write(p.hdr[:]); err != nil {
		return err
	}
	_, err := p.w.Write(data)
	return err
}
