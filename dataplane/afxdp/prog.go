//go:build linux

package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// Program counters, one per-CPU slot each.
const (
	ctrRedirectUDP = iota
	ctrRedirectNeighbor
	ctrRedirectPrefix
	ctrRedirectAll
	ctrPass
	ctrPassHostAddr
	ctrPassNoSocket
	ctrPassVLAN
	ctrRedirectFragment
	ctrDropVLAN
	numCounters
)

var counterNames = [numCounters]string{
	ctrRedirectUDP:      "xdp_redirect_udp",
	ctrRedirectNeighbor: "xdp_redirect_neighbor",
	ctrRedirectPrefix:   "xdp_redirect_prefix",
	ctrRedirectAll:      "xdp_redirect_all",
	ctrPass:             "xdp_pass",
	ctrPassHostAddr:     "xdp_pass_host_addr",
	ctrPassNoSocket:     "xdp_pass_no_socket",
	ctrPassVLAN:         "xdp_pass_vlan",
	ctrRedirectFragment: "xdp_redirect_fragment",
	ctrDropVLAN:         "xdp_drop_vlan",
}

// program is the loaded XDP program and its maps.
type program struct {
	prog *ebpf.Program
	// meta reports whether prog reads stripped VLAN tags from the XDP
	// metadata: then it is bound to one device, and only native XDP
	// attaches it.
	meta     bool
	filter   Filter
	mac      net.HardwareAddr
	xsks     *ebpf.Map // XSKMAP: RX queue index -> socket
	counters *ebpf.Map // per-CPU array of numCounters uint64
	udp4     *ebpf.Map // hash: IPv4 address -> portRange
	udp6     *ebpf.Map
	neigh4   *ebpf.Map // hash: IPv4 address -> 1
	neigh6   *ebpf.Map
	host4    *ebpf.Map // hash: host address -> 1
	host6    *ebpf.Map
	lpm4     *ebpf.Map // LPM trie: {prefix length, address} -> 1
	lpm6     *ebpf.Map
}

func (p *program) Close() error {
	var errs []error
	for _, c := range []interface{ Close() error }{p.prog, p.xsks, p.counters, p.udp4, p.udp6, p.neigh4, p.neigh6, p.host4, p.host6, p.lpm4, p.lpm6} {
		if c != nil && c != (*ebpf.Program)(nil) && c != (*ebpf.Map)(nil) {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// lpmKey4 and lpmKey6 are struct bpf_lpm_trie_key with the address in
// network order.
type lpmKey4 struct {
	PrefixLen uint32
	Addr      [4]byte
}

type lpmKey6 struct {
	PrefixLen uint32
	Addr      [16]byte
}

// portRange is the value of the UDP maps, in host byte order.
type portRange struct{ Lo, Hi uint16 }

// be16 returns the number that a 16-bit load of the big-endian bytes of v
// yields on this host (how the program compares EtherTypes and fields).
func be16(v uint16) int32 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return int32(binary.NativeEndian.Uint16(b[:]))
}

// mapFull explains the kernel's E2BIG for an address map that is full:
// it holds bound addresses of each family (name is the bound's constant).
func mapFull(err error, bound int, name string) error {
	if errors.Is(err, unix.E2BIG) {
		return fmt.Errorf("more than %d addresses of its family (%s): %w", bound, name, err)
	}
	return err
}

// newProgram creates the maps, fills them from f and loads the program.
// queues is the XSKMAP size (the device's RX queue count). With metaIfindex
// above 0 the program is bound to that device and reads stripped VLAN tags
// from the XDP metadata (see load); with 0 it sees in-band tags only.
func newProgram(f Filter, mac net.HardwareAddr, queues, metaIfindex int) (_ *program, err error) {
	if f.VLAN > maxVLANID {
		return nil, fmt.Errorf("filter: VLAN %d is not a VLAN identifier (1-%d, or 0 for untagged)", f.VLAN, maxVLANID)
	}
	p := &program{filter: f, mac: mac}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if f.PrefixCapacity < 0 {
		return nil, fmt.Errorf("filter: prefix capacity %d is negative (0: DefaultPrefixCapacity)", f.PrefixCapacity)
	}
	capacity := uint32(f.PrefixCapacity)
	if capacity == 0 {
		capacity = DefaultPrefixCapacity
	}
	mk := func(dst **ebpf.Map, name string, typ ebpf.MapType, k, v, n uint32, flags uint32) error {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Name: name, Type: typ, KeySize: k, ValueSize: v, MaxEntries: n, Flags: flags})
		if err != nil {
			return fmt.Errorf("create %s map: %w", name, err)
		}
		*dst = m
		return nil
	}
	for _, m := range []struct {
		dst     **ebpf.Map
		name    string
		typ     ebpf.MapType
		k, v, n uint32
		flags   uint32
	}{
		{&p.xsks, "wgpio_xsks", ebpf.XSKMap, 4, 4, uint32(queues), 0},
		{&p.counters, "wgpio_counters", ebpf.PerCPUArray, 4, 8, numCounters, 0},
		{&p.udp4, "wgpio_udp4", ebpf.Hash, 4, 4, MaxUDPAddrs, 0},
		{&p.udp6, "wgpio_udp6", ebpf.Hash, 16, 4, MaxUDPAddrs, 0},
		{&p.neigh4, "wgpio_neigh4", ebpf.Hash, 4, 4, maxNeighbours, 0},
		{&p.neigh6, "wgpio_neigh6", ebpf.Hash, 16, 4, maxNeighbours, 0},
		{&p.host4, "wgpio_host4", ebpf.Hash, 4, 4, MaxHostAddrs, 0},
		{&p.host6, "wgpio_host6", ebpf.Hash, 16, 4, MaxHostAddrs, 0},
		{&p.lpm4, "wgpio_lpm4", ebpf.LPMTrie, 8, 4, capacity, unix.BPF_F_NO_PREALLOC},
		{&p.lpm6, "wgpio_lpm6", ebpf.LPMTrie, 20, 4, capacity, unix.BPF_F_NO_PREALLOC},
	} {
		if err := mk(m.dst, m.name, m.typ, m.k, m.v, m.n, m.flags); err != nil {
			return nil, err
		}
	}
	one := uint32(1)
	for _, u := range f.UDP {
		if u.PortLo > u.PortHi {
			return nil, fmt.Errorf("filter: UDP port range %d-%d is empty", u.PortLo, u.PortHi)
		}
		v := portRange{u.PortLo, u.PortHi}
		var err error
		switch a := u.Addr.Unmap(); {
		case a.Is4():
			err = p.udp4.Put(a.As4(), v)
		case a.Is6():
			err = p.udp6.Put(a.As16(), v)
		default:
			err = fmt.Errorf("invalid address %v", u.Addr)
		}
		if err != nil {
			return nil, fmt.Errorf("filter: add UDP match %v: %w", u.Addr, mapFull(err, MaxUDPAddrs, "MaxUDPAddrs"))
		}
	}
	put := func(m4, m6 *ebpf.Map, addrs []netip.Addr, what string, bound int, name string) error {
		for _, a := range addrs {
			var err error
			switch a = a.Unmap(); {
			case a.Is4():
				err = m4.Put(a.As4(), one)
			case a.Is6():
				err = m6.Put(a.As16(), one)
			default:
				err = fmt.Errorf("invalid address %v", a)
			}
			if err != nil {
				return fmt.Errorf("filter: add %s %v: %w", what, a, mapFull(err, bound, name))
			}
		}
		return nil
	}
	if err := put(p.neigh4, p.neigh6, f.Neighbours, "neighbor address", maxNeighbours, "Filter.Neighbours' limit"); err != nil {
		return nil, err
	}
	if err := put(p.host4, p.host6, f.HostAddrs, "host address", MaxHostAddrs, "MaxHostAddrs"); err != nil {
		return nil, err
	}
	if p.prog, err = p.load(metaIfindex); err != nil {
		return nil, err
	}
	p.meta = metaIfindex > 0
	return p, nil
}

// load assembles and loads the program on the maps of p. With ifindex
// above 0 it is bound to that device (BPF_F_XDP_DEV_BOUND_ONLY, Linux 6.3)
// so that the bpf_xdp_metadata_rx_vlan_tag kfunc (Linux 6.8) reaches the
// driver's implementation; such a program attaches in native mode only.
func (p *program) load(ifindex int) (*ebpf.Program, error) {
	spec := &ebpf.ProgramSpec{
		Name:    "wgpio_xdp",
		Type:    ebpf.XDP,
		License: "Dual MIT/GPL",
	}
	kfunc := int64(-1)
	if ifindex > 0 {
		id, err := vlanTagKfunc()
		if err != nil {
			return nil, err
		}
		kfunc = id
		spec.Ifindex = uint32(ifindex)
		spec.Flags = unix.BPF_F_XDP_DEV_BOUND_ONLY
	}
	spec.Instructions = p.instructions(p.filter, p.mac, kfunc)
	prog, err := ebpf.NewProgram(spec)
	if err != nil {
		return nil, fmt.Errorf("load XDP program: %w", err)
	}
	return prog, nil
}

// reloadPortable replaces a device-bound program with one that reads no
// metadata (generic XDP attaches no device-bound program).
func (p *program) reloadPortable() error {
	prog, err := p.load(0)
	if err != nil {
		return err
	}
	p.prog.Close()
	p.prog, p.meta = prog, false
	return nil
}

// instructions assembles the filter. Registers: r6 = ctx (struct xdp_md),
// r7 = data, r8 = data_end, r9 = L3 header, then the counter index; the
// stack holds the lookup keys: fp-24 the LPM prefix length, fp-20..fp-4 the
// address (also the hash key), fp-32 the counter index, fp-40 and fp-38
// the TPID and TCI the metadata kfunc writes, fp-56..fp-44 the MAC
// addresses while a priority tag is taken off (priorityTag). kfunc is the BTF ID of
// bpf_xdp_metadata_rx_vlan_tag in vmlinux, or -1 for no metadata.
func (p *program) instructions(f Filter, mac net.HardwareAddr, kfunc int64) asm.Instructions {
	const (
		r0, r1, r2, r3, r6, r7, r8, r9, fp = asm.R0, asm.R1, asm.R2, asm.R3, asm.R6, asm.R7, asm.R8, asm.R9, asm.RFP
		keyAddr                            = -20
		keyLPM                             = -24
		keyCtr                             = -32
		// struct xdp_md offsets (include/uapi/linux/bpf.h).
		mdData, mdDataEnd, mdRXQueue = 0, 4, 16
	)
	var in asm.Instructions
	emit := func(ins ...asm.Instruction) { in = append(in, ins...) }
	label := func(name string, ins asm.Instruction) { in = append(in, ins.WithSymbol(name)) }
	// need n bytes from register base or go to label.
	need := func(base asm.Register, n int32, orElse string) {
		emit(asm.Mov.Reg(r3, base), asm.Add.Imm(r3, n), asm.JGT.Reg(r3, r8, orElse))
	}
	lookup := func(m *ebpf.Map, key int32) {
		emit(asm.LoadMapPtr(r1, m.FD()), asm.Mov.Reg(r2, fp), asm.Add.Imm(r2, key), asm.FnMapLookupElem.Call())
	}
	redirect := func(ctr int32) { emit(asm.Mov.Imm(r9, ctr), asm.Ja.Label("redirect")) }
	// copyAddr copies n 32-bit words from base+off to the address key.
	copyAddr := func(base asm.Register, off int16, words int) {
		for i := range words {
			emit(asm.LoadMem(r2, base, off+int16(4*i), asm.Word), asm.StoreMem(fp, keyAddr+int16(4*i), r2, asm.Word))
		}
	}
	// checkPort compares the UDP destination port at r9+off with the range
	// r0 points to, and redirects counting ctr.
	checkPort := func(off int16, orElse string, ctr int32) {
		emit(asm.LoadMem(r2, r9, off, asm.Half), asm.HostTo(asm.BE, r2, asm.Half),
			asm.LoadMem(r3, r0, 0, asm.Half), asm.JLT.Reg(r2, r3, orElse),
			asm.LoadMem(r3, r0, 2, asm.Half), asm.JGT.Reg(r2, r3, orElse))
		redirect(ctr)
	}
	checkMAC := func() {
		m := [8]byte{}
		copy(m[:], mac)
		emit(asm.LoadMem(r2, r7, 0, asm.Word), asm.JNE.Imm32(r2, int32(binary.NativeEndian.Uint32(m[0:4])), "pass"),
			asm.LoadMem(r2, r7, 4, asm.Half), asm.JNE.Imm(r2, int32(binary.NativeEndian.Uint16(m[4:6])), "pass"))
	}

	emit(asm.Mov.Reg(r6, asm.R1))
	if kfunc >= 0 && !f.All {
		p.strippedTag(f, kfunc, emit, label)
	}
	label("data", asm.LoadMem(r7, r6, mdData, asm.Word))
	emit(asm.LoadMem(r8, r6, mdDataEnd, asm.Word))
	need(r7, 14, "pass")
	if f.All {
		redirect(ctrRedirectAll)
	} else {
		p.parse(f, emit, label, need, lookup, redirect, copyAddr, checkPort, checkMAC)
	}
	p.tail(emit, label, lookup, f.Prefixes && !f.All, !f.All)
	return in
}

// strippedTag emits the check of a tag the NIC stripped (RX VLAN offload):
// bpf_xdp_metadata_rx_vlan_tag(ctx, &tpid, &tci) returns 0 with the tag,
// or an error (-ENODATA: no tag stripped; -EOPNOTSUPP: the driver does not
// say), and the frame is then judged by its bytes alone. A stripped tag of
// another VLAN, or an 802.1ad one of a VID other than 0, passes; one of
// f.VLAN is put back in front of the EtherType (bpf_xdp_adjust_head makes
// the room); a stripped priority tag (VID 0, 802.1Q or 802.1ad) is read as
// none, and the frame's bytes decide (passed, a LAN host's frame of
// 802.1ad VID 0 went out of compat mode's WAN unencrypted, as the in-band
// one did: priorityTag). The kfunc's TCI is in
// host order, its TPID in network order (Documentation/networking/
// xdp-rx-metadata.rst).
func (p *program) strippedTag(f Filter, kfunc int64, emit func(...asm.Instruction), label func(string, asm.Instruction)) {
	const (
		r0, r1, r2, r3, r6, r7, r8, fp = asm.R0, asm.R1, asm.R2, asm.R3, asm.R6, asm.R7, asm.R8, asm.RFP
		keyTPID, keyTCI                = -40, -38
		mdData, mdDataEnd              = 0, 4
	)
	emit(asm.StoreImm(fp, keyTPID, 0, asm.Word),
		asm.Mov.Reg(r1, r6),
		asm.Mov.Reg(r2, fp), asm.Add.Imm(r2, keyTPID),
		asm.Mov.Reg(r3, fp), asm.Add.Imm(r3, keyTCI),
		asm.Instruction{OpCode: asm.OpCode(asm.JumpClass).SetJumpOp(asm.Call), Src: asm.PseudoKfuncCall, Constant: kfunc},
		asm.JNE.Imm(r0, 0, "data"),
		// A stripped tag of VID 0, of either TPID, is a priority tag
		// (Linux reads it as none): the frame's own bytes decide.
		asm.LoadMem(r2, fp, keyTCI, asm.Half), asm.And.Imm(r2, vlanIDMask), asm.JEq.Imm(r2, 0, "data"),
		asm.LoadMem(r3, fp, keyTPID, asm.Half), asm.JNE.Imm(r3, be16(unix.ETH_P_8021Q), "pass_vlan"))
	if f.VLAN == 0 {
		emit(asm.Ja.Label("pass_vlan"))
		return
	}
	emit(asm.JNE.Imm(r2, int32(f.VLAN), "pass_vlan"),
		asm.Mov.Reg(r1, r6), asm.Mov.Imm(r2, -vlanTagLen), asm.FnXdpAdjustHead.Call(),
		asm.JNE.Imm(r0, 0, "pass_vlan"),
		asm.LoadMem(r7, r6, mdData, asm.Word), asm.LoadMem(r8, r6, mdDataEnd, asm.Word),
		asm.Mov.Reg(r3, r7), asm.Add.Imm(r3, 14+vlanTagLen), asm.JGT.Reg(r3, r8, "pass_vlan"),
		// The MAC addresses move 4 bytes to the front; the EtherType
		// stays where it was, behind the tag.
		asm.LoadMem(r2, r7, vlanTagLen, asm.DWord), asm.LoadMem(r3, r7, vlanTagLen+8, asm.Word),
		asm.StoreMem(r7, 0, r2, asm.DWord), asm.StoreMem(r7, 8, r3, asm.Word),
		asm.StoreImm(r7, 12, int64(be16(unix.ETH_P_8021Q)), asm.Half),
		asm.LoadMem(r2, fp, keyTCI, asm.Half), asm.HostTo(asm.BE, r2, asm.Half),
		asm.StoreMem(r7, 14, r2, asm.Half))
}

// priorityTag emits the removal of an outer tag of VID 0 that Linux reads
// as a priority tag but parse does not step over: an 802.1ad one, or an
// 802.1Q one in front of another tag (Linux takes any tag with VID 0 off
// and goes on with what follows, __netif_receive_skb_core). The MAC
// addresses move 4 bytes back over the tag and bpf_xdp_adjust_head drops
// the 4 bytes in front, so that the socket and the kernel both see the
// frame with the tag gone: what follows is judged as if it came so (an
// untagged frame, or one 802.1Q tag). Passed with the tag, such a frame was
// routed by the host's kernel, in compat mode (no exception TUN) out of
// the default route unencrypted. Each call takes one tag off (n tells
// its labels apart): instructions calls it twice, and then once with last,
// which drops a frame that still has such a tag (xdp_drop_vlan): Linux
// takes off every VID-0 tag in turn, so that a frame of three or more is
// untagged to it, and passed it was routed as the one tag was (compat
// mode: 802.1ad VID 0 thrice, or 802.1Q VID 0 four times, to a peer's
// prefix left the WAN unencrypted). A frame too short to hold the inner
// EtherType goes on unchanged.
func (p *program) priorityTag(emit func(...asm.Instruction), label func(string, asm.Instruction), n string, last bool) {
	const (
		r0, r1, r2, r3, r6, r7, r8, fp = asm.R0, asm.R1, asm.R2, asm.R3, asm.R6, asm.R7, asm.R8, asm.RFP
		keyMAC                         = -56 // 12 bytes: the MAC addresses while the head moves
		mdData, mdDataEnd              = 0, 4
	)
	emit(asm.LoadMem(r2, r7, 12, asm.Half),
		asm.Mov.Reg(r3, r7), asm.Add.Imm(r3, 18), asm.JGT.Reg(r3, r8, "tags"+n),
		asm.JEq.Imm(r2, be16(unix.ETH_P_8021AD), "vid0"+n),
		asm.JNE.Imm(r2, be16(unix.ETH_P_8021Q), "tags"+n),
		asm.LoadMem(r2, r7, 16, asm.Half),
		asm.JEq.Imm(r2, be16(unix.ETH_P_8021Q), "vid0"+n),
		asm.JNE.Imm(r2, be16(unix.ETH_P_8021AD), "tags"+n))
	label("vid0"+n, asm.LoadMem(r2, r7, 14, asm.Half))
	emit(asm.And.Imm(r2, be16(vlanIDMask)), asm.JNE.Imm(r2, 0, "tags"+n))
	if last {
		emit(asm.Ja.Label("drop_vlan"))
		label("tags"+n, asm.Mov.Imm(r2, 0))
		return
	}
	emit(asm.LoadMem(r2, r7, 0, asm.DWord), asm.StoreMem(fp, keyMAC, r2, asm.DWord),
		asm.LoadMem(r2, r7, 8, asm.Word), asm.StoreMem(fp, keyMAC+8, r2, asm.Word),
		asm.Mov.Reg(r1, r6), asm.Mov.Imm(r2, vlanTagLen), asm.FnXdpAdjustHead.Call(),
		asm.JNE.Imm(r0, 0, "pass_vlan"),
		asm.LoadMem(r7, r6, mdData, asm.Word), asm.LoadMem(r8, r6, mdDataEnd, asm.Word),
		asm.Mov.Reg(r3, r7), asm.Add.Imm(r3, 14), asm.JGT.Reg(r3, r8, "pass"),
		asm.LoadMem(r2, fp, keyMAC, asm.DWord), asm.StoreMem(r7, 0, r2, asm.DWord),
		asm.LoadMem(r2, fp, keyMAC+8, asm.Word), asm.StoreMem(r7, 8, r2, asm.Word))
	label("tags"+n, asm.Mov.Imm(r2, 0))
}

// parse emits the filter proper (see instructions).
func (p *program) parse(f Filter, emit func(...asm.Instruction), label func(string, asm.Instruction),
	need func(asm.Register, int32, string), lookup func(*ebpf.Map, int32), redirect func(int32),
	copyAddr func(asm.Register, int16, int), checkPort func(int16, string, int32), checkMAC func()) {
	const (
		r0, r2, r3, r7, r8, r9, fp = asm.R0, asm.R2, asm.R3, asm.R7, asm.R8, asm.R9, asm.RFP
		keyAddr                    = -20
		keyLPM                     = -24
	)
	// prefix emits the LAN match of one address family at name: a frame
	// to our MAC whose destination is no host address and lies in a
	// prefix of lpm (key: prefix length bits, then the address) goes to
	// the socket. Without Filter.Prefixes, name jumps to pass.
	prefix := func(name string, host, lpm *ebpf.Map, bits int64) {
		if !f.Prefixes {
			label(name, asm.Ja.Label("pass"))
			return
		}
		label(name, asm.Mov.Imm(r2, 0))
		checkMAC()
		// A multicast or limited-broadcast destination (in a frame to
		// our MAC) is the host's: Linux delivers it to its own
		// listeners and forwards none of it.
		emit(asm.LoadMem(r2, fp, keyAddr, asm.Byte))
		if bits == 32 {
			emit(asm.And.Imm(r2, 0xf0), asm.JEq.Imm(r2, 0xe0, "pass"),
				asm.LoadMem(r2, fp, keyAddr, asm.Word), asm.JEq.Imm32(r2, -1, "pass"))
		} else {
			emit(asm.JEq.Imm(r2, 0xff, "pass"))
		}
		lookup(host, keyAddr)
		emit(asm.JNE.Imm(r0, 0, "pass_host"), asm.StoreImm(fp, keyLPM, bits, asm.Word))
		lookup(lpm, keyLPM)
		emit(asm.JEq.Imm(r0, 0, "pass"))
		redirect(ctrRedirectPrefix)
	}

	// A frame to another host's unicast MAC (the I/G bit clear, IEEE
	// 802 §8.2) is not ours, whatever its addresses: passed, and the
	// kernel drops it as on any interface (PACKET_OTHERHOST, ip_rcv), as
	// it drops one before Linux's wg0 sees it (a switch flooding a frame
	// for a host that took over our address, a bridge, promiscuous
	// mode). Group addresses go on: Linux takes a unicast IP packet in
	// a broadcast or multicast frame (drop_unicast_in_l2_multicast off
	// by default), and they carry ARP and NDP.
	emit(asm.LoadMem(r2, r7, 0, asm.Byte), asm.And.Imm(r2, 1), asm.JNE.Imm(r2, 0, "l2_group"))
	checkMAC()
	label("l2_group", asm.Mov.Imm(r2, 0))
	p.priorityTag(emit, label, "1", false)
	p.priorityTag(emit, label, "2", false)
	p.priorityTag(emit, label, "3", true)
	// One 802.1Q tag of f.VLAN (VID 0, a priority tag, where f.VLAN is
	// 0) is stepped over; an untagged frame goes on only where f.VLAN is
	// 0; a frame with an 802.1ad tag, or with a second tag behind the
	// first, is passed where the EtherType is judged (IEEE 802.1Q §9.5).
	emit(asm.Mov.Reg(r9, r7), asm.Add.Imm(r9, 14),
		asm.LoadMem(r2, r7, 12, asm.Half))
	if f.VLAN == 0 {
		emit(asm.JNE.Imm(r2, be16(unix.ETH_P_8021Q), "l3"))
	} else {
		emit(asm.JNE.Imm(r2, be16(unix.ETH_P_8021Q), "pass_vlan"))
	}
	need(r7, 18, "pass")
	emit(asm.LoadMem(r2, r7, 14, asm.Half), asm.And.Imm(r2, be16(vlanIDMask)),
		asm.JNE.Imm(r2, be16(f.VLAN), "pass_vlan"),
		asm.LoadMem(r2, r7, 16, asm.Half), asm.Add.Imm(r9, 4))
	label("l3", asm.JEq.Imm(r2, be16(unix.ETH_P_IP), "ipv4"))
	emit(asm.JEq.Imm(r2, be16(unix.ETH_P_IPV6), "ipv6"),
		asm.JEq.Imm(r2, be16(unix.ETH_P_8021Q), "pass_vlan"),
		asm.JEq.Imm(r2, be16(unix.ETH_P_8021AD), "pass_vlan"),
		asm.JNE.Imm(r2, be16(unix.ETH_P_ARP), "pass"))

	// ARP: target protocol address at offset 24 of an Ethernet/IPv4 ARP
	// packet (RFC 826).
	need(r9, 28, "pass")
	copyAddr(r9, 24, 1)
	lookup(p.neigh4, keyAddr)
	if f.NeighbourUpdates {
		// And a gratuitous one: sender and target protocol
		// addresses the same (RFC 5227 §3). Other hosts' ARP stays
		// the kernel's (its own addresses on the interface).
		emit(asm.JNE.Imm(r0, 0, "arp_ours"),
			asm.LoadMem(r2, r9, 14, asm.Word), asm.LoadMem(r3, r9, 24, asm.Word),
			asm.JNE.Reg(r2, r3, "pass"))
		label("arp_ours", asm.Mov.Imm(r2, 0))
	} else {
		emit(asm.JEq.Imm(r0, 0, "pass"))
	}
	redirect(ctrRedirectNeighbor)

	// IPv4 (RFC 791). The UDP match takes only a 20-byte header that is
	// not a fragment (the kernel's socket takes the rest of what is
	// WireGuard for us), but with Filter.Fragments, UDP fragments too;
	// the LAN match takes options too (IHL 6-15): a
	// transit packet with options (record route, router alert) is the
	// fast path's to forward as Linux forwards it into wg0, and one left
	// to the kernel went out of its default route unencrypted, where no
	// allowed IPs but 0.0.0.0/0 covered it (no route into the exception
	// TUN), or was dropped with forwarding off.
	label("ipv4", asm.Mov.Reg(r3, r9))
	emit(asm.Add.Imm(r3, 20), asm.JGT.Reg(r3, r8, "pass"))
	copyAddr(r9, 16, 1)
	emit(asm.LoadMem(r2, r9, 0, asm.Byte), asm.JEq.Imm(r2, 0x45, "ipv4_20"),
		asm.JLT.Imm(r2, 0x46, "pass"), asm.JGT.Imm(r2, 0x4f, "pass"), asm.Ja.Label("prefix4"))
	label("ipv4_20", asm.LoadMem(r2, r9, 9, asm.Byte))
	fragment4 := "prefix4"
	if f.Fragments {
		fragment4 = "frag4"
	}
	emit(asm.JNE.Imm(r2, unix.IPPROTO_UDP, "prefix4"),
		asm.LoadMem(r2, r9, 6, asm.Half), asm.And.Imm(r2, be16(0x3fff)), asm.JNE.Imm(r2, 0, fragment4))
	need(r9, 28, "prefix4")
	lookup(p.udp4, keyAddr)
	emit(asm.JEq.Imm(r0, 0, "prefix4"))
	checkPort(22, "prefix4", ctrRedirectUDP)
	if f.Fragments {
		// A UDP fragment (MF or an offset, RFC 791 §3.2) to a UDP
		// address: one with an offset carries no UDP header and goes
		// by its address; a first one by its port too, when it holds
		// the UDP header (one too short for it goes too, for the
		// reassembler to count).
		label("frag4", asm.Mov.Imm(r2, 0))
		lookup(p.udp4, keyAddr)
		emit(asm.JEq.Imm(r0, 0, "prefix4"),
			asm.LoadMem(r2, r9, 6, asm.Half), asm.And.Imm(r2, be16(0x1fff)), asm.JNE.Imm(r2, 0, "redirect_fragment"))
		need(r9, 28, "redirect_fragment")
		checkPort(22, "prefix4", ctrRedirectFragment)
	}
	prefix("prefix4", p.host4, p.lpm4, 32)

	// IPv6 (RFC 8200): UDP or ICMPv6 as the first next header, and with
	// Filter.Fragments a Fragment header (RFC 8200 §4.5) followed by UDP.
	label("ipv6", asm.Mov.Reg(r3, r9))
	emit(asm.Add.Imm(r3, 40), asm.JGT.Reg(r3, r8, "pass"))
	copyAddr(r9, 24, 4)
	emit(asm.LoadMem(r2, r9, 6, asm.Byte), asm.JEq.Imm(r2, unix.IPPROTO_ICMPV6, "icmp6"))
	if f.Fragments {
		emit(asm.JEq.Imm(r2, unix.IPPROTO_FRAGMENT, "frag6"))
	}
	mld := f.MLDQueries && f.VLAN != 0
	if mld {
		emit(asm.JEq.Imm(r2, unix.IPPROTO_HOPOPTS, "mld6"))
	}
	emit(asm.JNE.Imm(r2, unix.IPPROTO_UDP, "prefix6"))
	need(r9, 48, "prefix6")
	lookup(p.udp6, keyAddr)
	emit(asm.JEq.Imm(r0, 0, "prefix6"))
	checkPort(42, "prefix6", ctrRedirectUDP)
	if f.Fragments {
		// The Fragment header's Next Header, offset and M at 40, 42;
		// the UDP header of a first fragment at 48.
		label("frag6", asm.Mov.Reg(r3, r9))
		emit(asm.Add.Imm(r3, 48), asm.JGT.Reg(r3, r8, "prefix6"),
			asm.LoadMem(r2, r9, 40, asm.Byte), asm.JNE.Imm(r2, unix.IPPROTO_UDP, "prefix6"))
		lookup(p.udp6, keyAddr)
		emit(asm.JEq.Imm(r0, 0, "prefix6"),
			asm.LoadMem(r2, r9, 42, asm.Half), asm.And.Imm(r2, be16(0xfff8)), asm.JNE.Imm(r2, 0, "redirect_fragment"))
		need(r9, 56, "redirect_fragment")
		checkPort(50, "prefix6", ctrRedirectFragment)
		label("redirect_fragment", asm.Mov.Imm(r9, ctrRedirectFragment))
		emit(asm.Ja.Label("redirect"))
	}
	if mld {
		// An MLD query (ICMPv6 type 130, RFC 3810 §5.1) behind an
		// 8-byte Hop-by-Hop Options header (length field 0), where
		// queriers put the Router Alert: next header at 40, length at
		// 41, ICMPv6 type at 48. Any other such frame is judged as
		// before.
		label("mld6", asm.Mov.Reg(r3, r9))
		emit(asm.Add.Imm(r3, 49), asm.JGT.Reg(r3, r8, "prefix6"),
			asm.LoadMem(r2, r9, 40, asm.Byte), asm.JNE.Imm(r2, unix.IPPROTO_ICMPV6, "prefix6"),
			asm.LoadMem(r2, r9, 41, asm.Byte), asm.JNE.Imm(r2, 0, "prefix6"),
			asm.LoadMem(r2, r9, 48, asm.Byte), asm.JNE.Imm(r2, 130, "prefix6"),
			asm.Mov.Imm(r9, ctrRedirectNeighbor), asm.Ja.Label("redirect"))
	}
	// NDP neighbour solicitation (135) and advertisement (136): target
	// address at offset 8 of the ICMPv6 message (RFC 4861 section 4.3).
	// One neither to nor about us is judged as any other packet by the
	// LAN match, its destination put back in the key: a unicast one to a
	// peer's allowed IPs is transit (Linux forwards an NS or NA as any
	// other packet), and passed to the kernel it left by the kernel's
	// default route unencrypted where only ::/0 covered it
	// (TestFilterDefaultRoute "lan6 ndp ns unicast").
	label("icmp6", asm.Mov.Reg(r3, r9))
	emit(asm.Add.Imm(r3, 64), asm.JGT.Reg(r3, r8, "prefix6"),
		asm.LoadMem(r2, r9, 40, asm.Byte), asm.JLT.Imm(r2, 135, "prefix6"), asm.JGT.Imm(r2, 136, "prefix6"))
	lookup(p.neigh6, keyAddr)
	emit(asm.JNE.Imm(r0, 0, "ndp"))
	copyAddr(r9, 48, 4)
	lookup(p.neigh6, keyAddr)
	emit(asm.JNE.Imm(r0, 0, "ndp"))
	copyAddr(r9, 24, 4)
	if f.NeighbourUpdates {
		// An advertisement to a multicast destination: an
		// unsolicited one (the frame's bounds checked above).
		emit(asm.LoadMem(r2, r9, 40, asm.Byte), asm.JNE.Imm(r2, 136, "prefix6"),
			asm.LoadMem(r2, r9, 24, asm.Byte), asm.JEq.Imm(r2, 0xff, "ndp"))
	}
	emit(asm.Ja.Label("prefix6"))
	label("ndp", asm.Mov.Imm(r9, ctrRedirectNeighbor))
	emit(asm.Ja.Label("redirect"))
	prefix("prefix6", p.host6, p.lpm6, 128)
}

// tail emits the redirect, pass and counting sections.
func (p *program) tail(emit func(...asm.Instruction), label func(string, asm.Instruction), lookup func(*ebpf.Map, int32), hostPass, vlanPass bool) {
	const (
		r0, r1, r2, r3, r6, r7, r9, fp = asm.R0, asm.R1, asm.R2, asm.R3, asm.R6, asm.R7, asm.R9, asm.RFP
		keyCtr                         = -32
		mdRXQueue                      = 16
	)

	// Redirect to the socket of this RX queue; with none there,
	// bpf_redirect_map returns the low bits of its flags: XDP_PASS.
	label("redirect", asm.LoadMapPtr(r1, p.xsks.FD()))
	emit(asm.LoadMem(r2, r6, mdRXQueue, asm.Word), asm.Mov.Imm(r3, xdpPass),
		asm.FnRedirectMap.Call(), asm.Mov.Reg(r7, r0),
		asm.JEq.Imm(r0, xdpRedirect, "count"),
		asm.Mov.Imm(r9, ctrPassNoSocket), asm.Ja.Label("count"))
	if hostPass {
		label("pass_host", asm.Mov.Imm(r9, ctrPassHostAddr))
		emit(asm.Mov.Imm(r7, xdpPass), asm.Ja.Label("count"))
	}
	if vlanPass {
		label("pass_vlan", asm.Mov.Imm(r9, ctrPassVLAN))
		emit(asm.Mov.Imm(r7, xdpPass), asm.Ja.Label("count"))
		label("drop_vlan", asm.Mov.Imm(r9, ctrDropVLAN))
		emit(asm.Mov.Imm(r7, xdpDrop), asm.Ja.Label("count"))
	}
	label("pass", asm.Mov.Imm(r9, ctrPass))
	emit(asm.Mov.Imm(r7, xdpPass))
	label("count", asm.StoreMem(fp, keyCtr, r9, asm.Word))
	lookup(p.counters, keyCtr)
	emit(asm.JEq.Imm(r0, 0, "out"), asm.Mov.Imm(r1, 1), asm.StoreXAdd(r0, r1, asm.DWord))
	label("out", asm.Mov.Reg(r0, r7))
	emit(asm.Return())
}

// counterValues sums the per-CPU counters.
func (p *program) counterValues(into map[string]uint64) error {
	var per []uint64
	for i := uint32(0); i < numCounters; i++ {
		if err := p.counters.Lookup(i, &per); err != nil {
			return fmt.Errorf("read XDP counters: %w", err)
		}
		var sum uint64
		for _, v := range per {
			sum += v
		}
		into[counterNames[i]] += sum
	}
	return nil
}

// prefixKey returns the LPM map and key for pfx.
// prefixKeys is prefixKey for prefixes of one family: their map and their
// keys, a []lpmKey4 or []lpmKey6 (for the map's batch calls).
func (p *program) prefixKeys(pfxs []netip.Prefix) (*ebpf.Map, any, error) {
	v4 := pfxs[0].Addr().Is4()
	k4, k6 := []lpmKey4(nil), []lpmKey6(nil)
	for _, pfx := range pfxs {
		if !pfx.IsValid() {
			return nil, nil, fmt.Errorf("invalid prefix %v", pfx)
		}
		if pfx.Addr().Is4() != v4 {
			return nil, nil, fmt.Errorf("prefixes of two families in one batch: %v and %v", pfxs[0], pfx)
		}
		pfx = pfx.Masked()
		if v4 {
			k4 = append(k4, lpmKey4{uint32(pfx.Bits()), pfx.Addr().As4()})
		} else {
			k6 = append(k6, lpmKey6{uint32(pfx.Bits()), pfx.Addr().As16()})
		}
	}
	if v4 {
		return p.lpm4, k4, nil
	}
	return p.lpm6, k6, nil
}

func (p *program) prefixKey(pfx netip.Prefix) (*ebpf.Map, any, error) {
	if !pfx.IsValid() {
		return nil, nil, fmt.Errorf("invalid prefix %v", pfx)
	}
	pfx = pfx.Masked()
	if a := pfx.Addr(); a.Is4() {
		return p.lpm4, lpmKey4{uint32(pfx.Bits()), a.As4()}, nil
	}
	return p.lpm6, lpmKey6{uint32(pfx.Bits()), pfx.Addr().As16()}, nil
}
