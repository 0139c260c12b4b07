package fastpath

import (
	"encoding/binary"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/protocol"
)

// aheadFrame writes into f a WAN frame holding a transport message of
// receiver index idx: Ethernet (tagged when vlan), IPv4 with ihl 32-bit
// words of header or IPv6, UDP. id is written where the IPv4
// identification goes, a field the message's offset does not depend on.
func aheadFrame(f *dataplane.Frame, vlan, v6 bool, ihl int, id uint16, idx uint32, typ byte) {
	l2 := header.EthernetLen
	d := f.Data()[:cap(f.Data())]
	clear(d[:200])
	if vlan {
		binary.BigEndian.PutUint16(d[12:14], header.EtherTypeVLAN)
		binary.BigEndian.PutUint16(d[14:16], 7)
		l2 = header.EthernetVLANLen
	}
	l3 := header.IPv6Len
	et := uint16(header.EtherTypeIPv6)
	if !v6 {
		l3, et = ihl*4, header.EtherTypeIPv4
		d[l2] = 0x40 | byte(ihl)
		binary.BigEndian.PutUint16(d[l2+4:l2+6], id)
	} else {
		d[l2] = 0x60
	}
	binary.BigEndian.PutUint16(d[l2-2:l2], et)
	off := l2 + l3 + header.UDPLen
	d[off] = typ
	binary.LittleEndian.PutUint32(d[off+4:off+8], idx)
	binary.LittleEndian.PutUint64(d[off+8:off+16], uint64(id))
	f.SetLen(off + protocol.TransportMinSize)
}

// aheadOff is where aheadFrame puts the message.
func aheadOff(vlan, v6 bool, ihl int) int {
	off := header.EthernetLen + header.UDPLen
	if vlan {
		off += 4
	}
	if v6 {
		return off + header.IPv6Len
	}
	return off + ihl*4
}

// TestOneSession checks inboundAhead's short cut against aheadTransport:
// oneSession says the frames it reads (the first, middle and last of a
// burst; here the middle one varies) are of one receiver index only when
// aheadTransport reads them as transport messages of that index, and
// says so for the bursts it is for (one session, whatever the fields that
// do not move the message: lengths, IPv4 identification).
func TestOneSession(t *testing.T) {
	p, err := dataplane.NewPool(make([]byte, 8*dataplane.DefaultFrameSize), dataplane.DefaultFrameSize, dataplane.DefaultHeadroom)
	if err != nil {
		t.Fatal(err)
	}
	c := dataplane.NewCache(p)
	frames := make([]dataplane.Frame, 4)
	if n := c.AllocFrames(frames); n != len(frames) {
		t.Fatalf("allocated %d frames", n)
	}
	type shape struct {
		vlan, v6 bool
		ihl      int
	}
	shapes := []shape{{false, false, 5}, {false, false, 6}, {true, false, 5}, {true, false, 15}, {false, true, 0}, {true, true, 0}}
	for _, a := range shapes {
		for _, b := range shapes {
			for _, idx := range []uint32{1, 2} {
				for _, typ := range []byte{protocol.TypeTransport, protocol.TypeInitiation} {
					aheadFrame(&frames[0], a.vlan, a.v6, a.ihl, 0x1234, 1, protocol.TypeTransport)
					aheadFrame(&frames[1], a.vlan, a.v6, a.ihl, 0x5678, 1, protocol.TypeTransport)
					aheadFrame(&frames[2], b.vlan, b.v6, b.ihl, 0x9abc, idx, typ)
					// Where the first frame's message is, a transport
					// header of its index, in front of the frame's own.
					if offA, offB := aheadOff(a.vlan, a.v6, a.ihl), aheadOff(b.vlan, b.v6, b.ihl); offA+8 <= offB {
						d := frames[2].Data()
						d[offA] = protocol.TypeTransport
						binary.LittleEndian.PutUint32(d[offA+4:offA+8], 1)
					}
					aheadFrame(&frames[3], a.vlan, a.v6, a.ihl, 0xdef0, 1, protocol.TypeTransport)
					want := true
					for i := range frames {
						x, _, ok := aheadTransport(frames[i].Data())
						want = want && ok && x == 1
					}
					got := oneSession(frames)
					if got && !want {
						t.Errorf("%+v then %+v, index %d, type %d: one session, but aheadTransport reads otherwise", a, b, idx, typ)
					}
					if !got && want && a == b {
						t.Errorf("%+v, index %d, type %d: one session not seen", a, idx, typ)
					}
				}
			}
		}
	}
	// A frame too short for the first frame's message.
	aheadFrame(&frames[0], false, false, 5, 0, 1, protocol.TypeTransport)
	frames[1].SetLen(30)
	if oneSession(frames[:2]) {
		t.Error("a runt frame read as one session")
	}
	if oneSession(nil) {
		t.Error("an empty burst read as one session")
	}
	c.FreeFrames(frames)
}
