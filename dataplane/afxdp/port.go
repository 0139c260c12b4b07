//go:build linux

package afxdp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/vishvananda/netlink"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/internal/plural"
	"golang.org/x/sys/unix"
)

// AttachMode says how the XDP program is attached to the device.
type AttachMode int

const (
	// AttachAuto tries native (driver) XDP and falls back to generic.
	AttachAuto AttachMode = iota
	// AttachNative runs the program in the driver (XDP_FLAGS_DRV_MODE).
	AttachNative
	// AttachGeneric runs it on the kernel's generic path after the skb is
	// built (XDP_FLAGS_SKB_MODE): slower, but every device has it.
	AttachGeneric
)

// MaxFrameLen returns the longest Ethernet frame, in bytes with its
// 802.1Q tag if any, that a port on a UMEM of frameSize-byte chunks both
// receives and sends: the chunk less the headroom the kernel leaves in
// front of received data (XDP_PACKET_HEADROOM) and the 4 bytes TX keeps
// for a tag (3,836 for dataplane.DefaultFrameSize). The kernel drops a
// longer received frame at the socket, counted as xsk_rx_dropped
// (net/xdp/xsk.c, __xsk_rcv: -ENOSPC for a frame over the chunk without
// XDP_USE_SG, which this package does not use).
func MaxFrameLen(frameSize int) int { return frameSize - xdpPacketHeadroom - vlanTagLen }

// Default sizes.
const (
	// DefaultRingSize is the default entry count of each ring.
	DefaultRingSize = 2048
	// DefaultFramesPerQueue is the default UMEM size of a port opened
	// without a UMEM, per queue: the fill ring plus as many again for
	// frames in flight.
	DefaultFramesPerQueue = 2 * DefaultRingSize
)

// Config configures a port. The zero value is usable.
type Config struct {
	// Queues is the number of queues, 0..Queues-1 (default: all the
	// device's RX queues).
	Queues int
	// UMEM is the memory to share with other ports; nil makes a private
	// one of FrameSize × NumFrames bytes in Mode. A shared UMEM needs more
	// frames than the fill rings of all the queues bound to it hold
	// together, or transmitters find it empty. If the kernel refuses
	// to share, the port gets a private UMEM and frames transmitted
	// between the two are copied and counted (Stats.Copies).
	UMEM *UMEM
	// FrameSize, NumFrames and Mode size a private UMEM (defaults:
	// dataplane.DefaultFrameSize, DefaultFramesPerQueue × Queues, ModeAuto).
	FrameSize, NumFrames int
	Mode                 Mode
	// Ring sizes in entries, powers of 2 (default DefaultRingSize).
	FillRingSize, CompletionRingSize, RXRingSize, TXRingSize int
	// Attach is the XDP attach mode (default AttachAuto).
	Attach AttachMode
	// Filter says which frames go to the sockets; the rest go to the
	// kernel.
	Filter Filter
	// KeepRXVLANOffload leaves the device's RX VLAN offload as it is. By
	// default Open turns it off (the features rx-vlan-hw-parse and
	// rx-vlan-stag-hw-parse) while the port is open, so that the XDP
	// program sees every 802.1Q tag in the frame, and Close turns back
	// on what it turned off; see Port.StrippedTags.
	KeepRXVLANOffload bool
	// Journal, if not nil, records that change before it is made, and
	// forgets it once Close has undone it, so that if the process dies
	// first a later one can undo it (RestoreOffload).
	Journal OffloadJournal
}

// Port is an interface driven through one AF_XDP socket per queue and an
// XDP program that redirects the frames Filter selects. It implements
// dataplane.Port; the methods are safe for concurrent use, the halves have
// one owner each (see dataplane.RX and dataplane.TX).
type Port struct {
	name     string
	driver   string // the device's driver at Open ("veth", "mlx5_core", ...), or ""
	ifindex  int
	mac      net.HardwareAddr
	mtu      int // the interface's at Open
	umem     *UMEM
	shared   bool
	shareErr error // why the UMEM in Config was not shared, or nil
	native   bool
	nativeEr error
	prog     *program
	link     link.Link
	queues   []*queue
	offload  *vlanOffload    // RX VLAN offload turned off by Open, or nil
	ctl      *netlink.Handle // linkUp asks through it, or nil; closed by Close
	stripped StrippedTags
	whyTags  string
	fixTags  string // LogStrippedTags' fix when tags are unseen ("": the usual one)

	// curMTU is the MTU of the moment (the interface's at Open, then
	// SetMTU's), txMax the longest untagged frame Transmit sends:
	// curMTU + the Ethernet header, at most what a frame holds
	// (MaxMTU). Transmit loads txMax once per call.
	curMTU atomic.Int32
	txMax  atomic.Uint32

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	mu        sync.Mutex // guards the sockets' and maps' fds against Close while Stats reads them or a call changes the maps (lockMaps)
	// noBatch: the kernel refused a batch update of the prefix maps
	// (AddPrefixes then adds one at a time); noDeleteBatch, a batch
	// delete (DeletePrefixes then deletes one at a time). Guarded by mu.
	noBatch, noDeleteBatch bool
}

var _ dataplane.Port = (*Port)(nil)

// Open opens ifname, which must be in the calling thread's network
// namespace (the sockets and the program keep that namespace afterwards,
// so the port may then be used from any goroutine). It raises
// RLIMIT_MEMLOCK first. Errors wrap ErrNoSuchInterface, ErrNotEthernet, ErrQueueOutOfRange,
// ErrXDPUnsupported, ErrMTUTooLarge, ErrMemlock or ErrPermission with the
// fix.
func Open(ifname string, cfg Config) (_ *Port, err error) {
	_ = rlimit.RemoveMemlock() // best effort; a no-op where maps are charged to the memory cgroup
	raiseMemlock()
	l, err := netlink.LinkByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("%w: %s (list interfaces with `ip link`; open the port inside the interface's network namespace): %w", ErrNoSuchInterface, ifname, err)
	}
	if err := CheckEthernet(l); err != nil {
		return nil, err
	}
	a := l.Attrs()
	devQueues := rxQueues(ifname)
	if devQueues == 0 {
		devQueues = max(a.NumRxQueues, 1)
	}
	if cfg.Queues == 0 {
		cfg.Queues = devQueues
	}
	if cfg.Queues < 0 || cfg.Queues > devQueues {
		return nil, fmt.Errorf("%w: %s asked of %s, which has %s (ask for fewer, or add queues with ethtool -L)", ErrQueueOutOfRange,
			plural.Count(cfg.Queues, "queue", "queues"), ifname, plural.Count(devQueues, "RX queue", "RX queues"))
	}
	if cfg.Attach < AttachAuto || cfg.Attach > AttachGeneric {
		return nil, fmt.Errorf("afxdp: attach mode %d is none of AttachAuto, AttachNative and AttachGeneric", cfg.Attach)
	}
	sz := ringSizes{cfg.FillRingSize, cfg.CompletionRingSize, cfg.RXRingSize, cfg.TXRingSize}
	for _, p := range []*int{&sz.fill, &sz.comp, &sz.rx, &sz.tx} {
		if *p == 0 {
			*p = DefaultRingSize
		}
		if *p < 0 || *p&(*p-1) != 0 {
			return nil, fmt.Errorf("afxdp: ring size %d is not a power of 2", *p)
		}
	}
	p := &Port{name: ifname, driver: driverName(ifname), ifindex: a.Index, mac: a.HardwareAddr, mtu: a.MTU, umem: cfg.UMEM, shared: cfg.UMEM != nil,
		ctl: openControl()}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	private := func() error {
		n := cfg.NumFrames
		if n == 0 {
			n = max(DefaultFramesPerQueue, 2*sz.fill) * cfg.Queues
		}
		if least := cfg.Queues * (sz.fill + 2*dataplane.CacheBatch); n < least {
			return fmt.Errorf("afxdp: %s for %s with %d-entry fill rings: the fill rings would take them all (use at least %d)",
				plural.Count(n, "frame", "frames"), plural.Count(cfg.Queues, "queue", "queues"), sz.fill, least)
		}
		u, err := NewUMEM(UMEMConfig{FrameSize: cfg.FrameSize, NumFrames: n, Mode: cfg.Mode})
		p.umem, p.shared = u, false
		return err
	}
	if p.umem == nil {
		if err := private(); err != nil {
			return nil, err
		}
	}
	if !cfg.Filter.All && !cfg.KeepRXVLANOffload {
		if p.offload, err = disableRXVLANOffload(ifname, p.ifindex, p.mac, cfg.Journal); err != nil {
			return nil, err
		}
	}
	// The program reads stripped tags from the XDP metadata where the
	// driver offers them and native XDP may be used; if the kernel
	// refuses that program, the portable one sees in-band tags only.
	metaIfindex, whyNoMeta := 0, "generic XDP reads no metadata"
	if cfg.Attach != AttachGeneric && !cfg.Filter.All {
		ok, err := metadataHasVLANTag(p.ifindex)
		if _, kerr := vlanTagKfunc(); ok && kerr == nil {
			metaIfindex = p.ifindex
		} else {
			whyNoMeta = fmt.Sprintf("driver %q offers no VLAN tag in the XDP metadata", p.driver)
			if err = errors.Join(err, kerr); err != nil {
				whyNoMeta = err.Error()
			}
		}
	}
	if p.prog, err = newProgram(cfg.Filter, p.mac, devQueues, metaIfindex); err != nil && metaIfindex > 0 {
		whyNoMeta = err.Error()
		p.prog, err = newProgram(cfg.Filter, p.mac, devQueues, 0)
	}
	if err != nil {
		return nil, diagnose(fmt.Errorf("%s: %w", ifname, err))
	}
	for i := range cfg.Queues {
		s, err := p.umem.socket(p.ifindex, i, sz)
		if err != nil && i == 0 && p.shared && errors.Is(err, errShare) {
			// The kernel would not share (before Linux 5.10, see
			// HaveSharedUMEM; or a zero-copy UMEM and a driver without
			// zero-copy): fall back to a private UMEM; Transmit copies.
			p.shareErr = err
			if err = private(); err == nil {
				s, err = p.umem.socket(p.ifindex, i, sz)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ifname, err)
		}
		q := newQueue(p, i, s)
		p.queues = append(p.queues, q)
		if err := p.prog.xsks.Put(uint32(i), uint32(s.fd)); err != nil {
			return nil, fmt.Errorf("%s: add queue %d socket to XSKMAP: %w", ifname, i, err)
		}
	}
	if err := p.attach(cfg.Attach); err != nil {
		return nil, fmt.Errorf("%s: %w", ifname, err)
	}
	p.judgeStrippedTags(cfg, whyNoMeta)
	return p, nil
}

// judgeStrippedTags sets what StrippedTags reports, once attached.
func (p *Port) judgeStrippedTags(cfg Config, whyNoMeta string) {
	if cfg.Filter.All {
		p.stripped, p.whyTags = StrippedTagsNone, "the filter redirects every frame"
		return
	}
	if p.prog.meta && p.native {
		p.stripped, p.whyTags = StrippedTagsMetadata, "stripped tags are read from the XDP metadata"
		return
	}
	switch o := p.offload; {
	case p.driver == "veth":
		// A veth hands over the tag its peer's sender left beside the
		// frame (TX VLAN offload) whatever its own features say; with
		// the other end's TX VLAN offload off the kernel writes every
		// tag into the frame before it crosses (validate_xmit_vlan).
		// Judged at Open: turned on again later, it is not seen.
		peer, ok := vethPeer(p.ifindex)
		if ok && txVLANOffloadOff(peer) {
			p.stripped, p.whyTags = StrippedTagsNone, "the veth's other end, "+peer+", has TX VLAN offload off: the tags its senders add stay in the frames"
			break
		}
		why := "a veth passes the tags its other end's senders add as metadata (TX VLAN offload), which only native XDP reads, and " + whyNoMeta
		if !ok {
			// Its features are another namespace's: not read. Off
			// there for both tags, isolation holds; the error says
			// so rather than claim it is on.
			peer = "ITS-PEER"
			why += "; the other end is in another network namespace, where its TX VLAN offload cannot be read from here: with it off there for both tags, the tags stay in the frames and isolation holds"
		}
		p.stripped, p.whyTags = StrippedTagsUnseen, why
		p.fixTags = fmt.Sprintf("turn TX VLAN offload off on the veth's other end, both tags' (in its network namespace: ethtool -K %s txvlan off tx-vlan-stag-hw-insert off; its senders' tags then stay in the frames), or use native XDP (on a veth: the MTU of both ends at most %d)", peer, vethMaxXDPMTU)
	case o == nil:
		p.stripped, p.whyTags = StrippedTagsUnseen, "RX VLAN offload left as it is (KeepRXVLANOffload) and "+whyNoMeta
	case o.checkErr != nil:
		p.stripped, p.whyTags = StrippedTagsUnseen, "RX VLAN offload unknown ("+o.checkErr.Error()+") and "+whyNoMeta
	case len(o.stillOn) > 0:
		p.stripped, p.whyTags = StrippedTagsUnseen, fmt.Sprintf("RX VLAN offload %v cannot be turned off and %s", o.stillOn, whyNoMeta)
	default:
		p.stripped, p.whyTags = StrippedTagsNone, "RX VLAN offload is off"
	}
}

// StrippedTags says how the XDP program sees the 802.1Q tags the device
// strips before XDP (RX VLAN offload), with the reason in words.
// StrippedTagsUnseen means VLAN isolation does not hold for frames whose
// tag the device strips: a caller should say so loudly.
func (p *Port) StrippedTags() (StrippedTags, string) { return p.stripped, p.whyTags }

// attach links the program to the device; a bpf_link is released by the
// kernel when its last fd closes, so a killed process leaves nothing
// attached.
func (p *Port) attach(mode AttachMode) error {
	try := func(flags link.XDPAttachFlags) (link.Link, error) {
		return link.AttachXDP(link.XDPOptions{Program: p.prog.prog, Interface: p.ifindex, Flags: flags})
	}
	var err error
	switch mode {
	case AttachGeneric:
		p.link, err = try(link.XDPGenericMode)
		return p.attachError("generic", err)
	case AttachNative:
		if perr := HaveNativeXDP(p.name); conclusive(perr) {
			return fmt.Errorf("%w: attach native XDP on %s: %w", ErrXDPUnsupported, p.name, perr)
		}
		p.link, err = try(link.XDPDriverMode)
		p.native = err == nil
		return p.attachError("native", err)
	}
	// Auto: native unless the driver is known to lack it (an
	// inconclusive probe, as on kernels before 6.3, means: try).
	if perr := HaveNativeXDP(p.name); conclusive(perr) {
		p.nativeEr = perr
	} else if p.link, err = try(link.XDPDriverMode); err == nil {
		p.native = true
		return nil
	} else {
		p.nativeEr = p.attachError("native", err)
	}
	if p.prog.meta {
		// Generic XDP attaches no device-bound program.
		if err := p.prog.reloadPortable(); err != nil {
			return err
		}
	}
	p.link, err = try(link.XDPGenericMode)
	return p.attachError("generic", err)
}

// raiseMemlock raises the soft RLIMIT_MEMLOCK to the hard limit: UMEM
// pages are charged to it unless the process has CAP_IPC_LOCK
// (net/xdp/xdp_umem.c, xdp_umem_account_pages), even where BPF maps are
// not (Linux 5.11).
func raiseMemlock() {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl) == nil && rl.Cur < rl.Max {
		rl.Cur = rl.Max
		_ = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &rl)
	}
}

// driverName returns the device's driver as ethtool reports it, or "".
func driverName(ifname string) string {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, ifname)
	if err != nil {
		return ""
	}
	return unix.ByteSliceToString(info.Driver[:])
}

// Name is the interface name.
func (p *Port) Name() string { return p.name }

// MAC is the interface's hardware address at Open.
func (p *Port) MAC() net.HardwareAddr { return p.mac }

// NumQueues is the number of queues opened.
func (p *Port) NumQueues() int { return len(p.queues) }

// Queue returns queue i; it panics if i is out of range, as slice indexing
// does (a programming error, not input).
func (p *Port) Queue(i int) dataplane.Queue { return p.queues[i] }

// UMEM is the port's UMEM.
func (p *Port) UMEM() *UMEM { return p.umem }

// Pool is the port's frame pool (its UMEM's).
func (p *Port) Pool() *dataplane.Pool { return p.umem.pool }

// SharedUMEM reports whether the port uses the UMEM passed in Config
// (false if none was passed or the kernel refused to share it).
func (p *Port) SharedUMEM() bool { return p.shared }

// SharedUMEMError is why the UMEM passed in Config is not used (a
// *FeatureError where the kernel lacks sharing), or nil.
func (p *Port) SharedUMEMError() error { return p.shareErr }

// LogFallbacks logs at warning level what the port does slower than asked
// or possible, and why: generic instead of native XDP (NativeXDPError),
// its own UMEM instead of the shared one (SharedUMEMError). side names the
// port for its user ("WAN", "LAN").
func (p *Port) LogFallbacks(log *slog.Logger, side string) {
	if err := p.nativeEr; err != nil {
		log.Warn("generic XDP, slower than native", "side", side, "interface", p.name, "why", err)
	}
	if err := p.shareErr; err != nil {
		log.Warn("a UMEM of its own: frames to and from the other port are copied", "side", side, "interface", p.name, "why", err)
	}
}

// LogPartialChecksums logs a warning, naming side ("WAN", "LAN") and the
// fix, when the port's device is a veth. A host sending through a veth
// with TX checksum offload on (veth's default) leaves TCP and UDP
// checksums partial (CHECKSUM_PARTIAL in include/linux/skbuff.h: the
// pseudo-header sum only), for the device that transmits to complete;
// AF_XDP hands the frame over as it is, so a gateway that forwards it from
// the port sends the partial sum, which the receiver drops as a bad
// checksum. A real NIC's frames carry full checksums. The caller picks the
// ports whose hosts' packets it forwards.
func (p *Port) LogPartialChecksums(log *slog.Logger, side string) {
	if p.driver != "veth" {
		return
	}
	log.Warn("interface is a veth: the hosts on its other end must turn TX checksum offload off, or the TCP and UDP packets they send are forwarded with partial checksums (AF_XDP keeps them as they are) and their receivers drop them",
		"side", side, "interface", p.name, "fix", "ethtool -K <the other end> tx off")
}

// ZeroCopy reports whether the UMEM is in zero-copy mode.
func (p *Port) ZeroCopy() bool { return p.umem.ZeroCopy() }

// NativeXDP reports whether the program runs in the driver (true) or on the
// generic path (false). With AttachAuto, NativeXDPError says why native
// failed.
func (p *Port) NativeXDP() bool { return p.native }

// NativeXDPError is why native XDP was not used under AttachAuto, or nil.
func (p *Port) NativeXDPError() error { return p.nativeEr }

// Stats adds up the queues' counters and the XDP program's counters
// (Backend "xdp_*"); the sockets' XDP_STATISTICS appear in Backend as
// "xsk_*".
func (p *Port) Stats() dataplane.Stats {
	var s dataplane.Stats
	for _, q := range p.queues {
		s.Add(q.Stats())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.prog != nil && !p.closed.Load() {
		if s.Backend == nil {
			s.Backend = make(map[string]uint64)
		}
		_ = p.prog.counterValues(s.Backend)
	}
	return s
}

// Close detaches the program, closes the sockets and the maps, gives
// the frames the rings held back to the pool, and turns back on the RX
// VLAN offload Open turned off, on the interface of the port's index
// (renamed since or not; none when it was deleted). It waits for a
// half's owner that is inside a call to leave it; afterwards the halves'
// methods return 0. Frames callers still hold stay valid (see UMEM) and
// may be freed.
func (p *Port) Close() error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		for _, q := range p.queues {
			for q.rx.busy.Load() != 0 || q.tx.busy.Load() != 0 {
				runtime.Gosched()
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		var errs []error
		if p.link != nil {
			errs = append(errs, p.link.Close())
		}
		for _, q := range p.queues {
			q.release()
			p.umem.forget(q.sock)
		}
		if p.prog != nil {
			errs = append(errs, p.prog.Close())
		}
		if p.offload != nil {
			// By index, through the handle of the device's namespace.
			if err := p.offload.restoreOffload(p.ctl); err != nil {
				errs = append(errs, fmt.Errorf("%s: turn RX VLAN offload back on: %w", p.name, err))
			}
		}
		if p.ctl != nil {
			p.ctl.Close()
		}
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

// Pools returns the port's pool (dataplane.Accounter).
func (p *Port) Pools() []*dataplane.Pool { return []*dataplane.Pool{p.umem.pool} }

// AccountBuffers reports every chunk the port holds outside the pool's
// free list: in its halves' caches and in its four rings
// (dataplane.Accounter). Chunks the kernel took off the TX ring and has not
// yet completed are not seen; call it once traffic has settled, with no
// goroutine in the halves. After Close the port holds nothing.
func (p *Port) AccountBuffers(fn func(pl *dataplane.Pool, chunk uint64, place string)) {
	if p.closed.Load() {
		return
	}
	pl := p.umem.pool
	mask := ^uint64(pl.FrameSize() - 1)
	for _, q := range p.queues {
		s := q.sock
		// Caches given with UseCache are their owners' to report; the
		// queue's own are drained when replaced, and report nothing then.
		for _, c := range q.ownRX.AppendChunks(nil) {
			fn(pl, c, "rx cache")
		}
		for _, c := range q.ownTX.AppendChunks(nil) {
			fn(pl, c, "tx cache")
		}
		for i := atomic.LoadUint32(s.fill.cons); i != s.fill.cachedProd; i++ {
			fn(pl, s.fill.descs[i&s.fill.mask]&mask, "fill ring")
		}
		for i := s.rx.cachedCons; i != atomic.LoadUint32(s.rx.prod); i++ {
			fn(pl, s.rx.descs[i&s.rx.mask].Addr&mask, "rx ring")
		}
		for i := atomic.LoadUint32(s.tx.cons); i != s.tx.cachedProd; i++ {
			fn(pl, s.tx.descs[i&s.tx.mask].Addr&mask, "tx ring")
		}
		for i := s.comp.cachedCons; i != atomic.LoadUint32(s.comp.prod); i++ {
			fn(pl, s.comp.descs[i&s.comp.mask]&mask, "completion ring")
		}
	}
}

var _ dataplane.Accounter = (*Port)(nil)
