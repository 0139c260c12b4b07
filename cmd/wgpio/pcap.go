//go:build linux

package main

import (
	"encoding/binary"
	"io"
	"time"

	"github.com/wgpio/wgpio/fastpath"
)

// The pcapng format (draft-ietf-opsawg-pcapng, "PCAP Now Generic"): a
// Section Header Block, one Interface Description Block per gateway port
// (0 = LAN, 1 = WAN), then one Enhanced Packet Block per frame, whose
// interface ID names the port and whose epb_flags option the direction
// (received or transmitted). Little-endian; timestamps in nanoseconds
// (if_tsresol 9). tcpdump, tshark and Wireshark read it.
const (
	blockSHB = 0x0a0d0d0a // Section Header Block
	blockIDB = 0x00000001 // Interface Description Block
	blockEPB = 0x00000006 // Enhanced Packet Block

	byteOrderMagic = 0x1a2b3c4d
	// linkTypeEthernet is LINKTYPE_ETHERNET (IEEE 802.3 frames; the
	// tcpdump.org link-layer header types registry).
	linkTypeEthernet = 1

	optEndOfOpt  = 0
	optIfName    = 2 // if_name
	optIfTSResol = 9 // if_tsresol
	optEPBFlags  = 2 // epb_flags

	// epb_flags direction bits: 01 inbound, 10 outbound.
	epbInbound  = 1
	epbOutbound = 2

	// blockHeaderLen is a block's type and total length; maxBlockLen bounds
	// what a reader accepts from the gateway (an EPB of the longest
	// snapshot with its fields and options).
	blockHeaderLen = 8
	maxBlockLen    = fastpath.MaxCaptureSnapLen + 64
)

// captureIfaces are the interface IDs of the Interface Description Blocks.
var captureIfaces = map[fastpath.CapturePort]uint32{fastpath.CaptureLAN: 0, fastpath.CaptureWAN: 1}

// pcapWriter writes a pcapng stream. Not safe for concurrent use.
type pcapWriter struct {
	w   io.Writer
	buf []byte
}

// newPCAPWriter writes the section header and the LAN and WAN interface
// blocks for frames of up to snapLen bytes.
func newPCAPWriter(w io.Writer, snapLen int) (*pcapWriter, error) {
	p := &pcapWriter{w: w}
	b := p.buf[:0]
	// Section Header Block: byte-order magic, version 1.0, section length
	// unknown (-1), no options.
	b = block(b, blockSHB, func(b []byte) []byte {
		b = binary.LittleEndian.AppendUint32(b, byteOrderMagic)
		b = binary.LittleEndian.AppendUint16(b, 1)
		b = binary.LittleEndian.AppendUint16(b, 0)
		return binary.LittleEndian.AppendUint64(b, ^uint64(0))
	})
	for _, name := range []string{"lan", "wan"} { // interface IDs 0 and 1
		b = block(b, blockIDB, func(b []byte) []byte {
			b = binary.LittleEndian.AppendUint16(b, linkTypeEthernet)
			b = binary.LittleEndian.AppendUint16(b, 0)
			b = binary.LittleEndian.AppendUint32(b, uint32(snapLen))
			b = option(b, optIfName, []byte(name))
			b = option(b, optIfTSResol, []byte{9}) // 10^-9 s
			return option(b, optEndOfOpt, nil)
		})
	}
	p.buf = b
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	return p, nil
}

// writePacket writes one Enhanced Packet Block: data is the captured bytes,
// origLen the frame's length on the wire, port and dir where it was seen.
func (p *pcapWriter) writePacket(t time.Time, port fastpath.CapturePort, dir fastpath.CaptureDir, data []byte, origLen int) error {
	flags := uint32(epbInbound)
	if dir == fastpath.CaptureTX {
		flags = epbOutbound
	}
	ns := uint64(t.UnixNano())
	p.buf = block(p.buf[:0], blockEPB, func(b []byte) []byte {
		b = binary.LittleEndian.AppendUint32(b, captureIfaces[port])
		b = binary.LittleEndian.AppendUint32(b, uint32(ns>>32))
		b = binary.LittleEndian.AppendUint32(b, uint32(ns))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
		b = binary.LittleEndian.AppendUint32(b, uint32(origLen))
		b = append(b, data...)
		b = append(b, make([]byte, pad4(len(data)))...)
		b = option(b, optEPBFlags, binary.LittleEndian.AppendUint32(nil, flags))
		return option(b, optEndOfOpt, nil)
	})
	_, err := p.w.Write(p.buf)
	return err
}

// block appends a block of type typ whose body body appends, framed by its
// total length before and after.
func block(b []byte, typ uint32, body func([]byte) []byte) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, typ)
	b = binary.LittleEndian.AppendUint32(b, 0) // total length, below
	b = body(b)
	total := uint32(len(b) - start + 4)
	binary.LittleEndian.PutUint32(b[start+4:], total)
	return binary.LittleEndian.AppendUint32(b, total)
}

// option appends an option: code, length, value padded to 32 bits.
func option(b []byte, code uint16, v []byte) []byte {
	b = binary.LittleEndian.AppendUint16(b, code)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(v)))
	b = append(b, v...)
	return append(b, make([]byte, pad4(len(v)))...)
}

func pad4(n int) int { return (4 - n%4) % 4 }
