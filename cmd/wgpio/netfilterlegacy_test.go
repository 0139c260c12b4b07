//go:build linux && (amd64 || arm64)

package main

import (
	"encoding/binary"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestSkippedRulesLegacyInput: a legacy iptables filter table whose INPUT
// chain holds a rule (iptables-legacy -A INPUT -s 198.18.1.2 -p udp
// --dport 51820 -j DROP, a wg0 user's firewall) is reported with the
// chain named: the gateway's WireGuard datagrams skip INPUT, where the
// line said only that the table held entries, read as forwarding rules.
func TestSkippedRulesLegacyInput(t *testing.T) {
	tp := testenv.Topology(t, "nfl")
	ns := testenv.NS(t, tp, "a")
	missing := false
	var rules []string
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		// Asking for the table creates it, empty, in this namespace.
		var info iptGetinfo
		copy(info.Name[:], "filter")
		n := uint32(unsafe.Sizeof(info))
		if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_IP, iptSOGetInfo, uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&n)), 0); e != 0 {
			missing = true
			return nil
		}
		if err := replaceFilterWithInputRule(fd, info.NumEntries); err != nil {
			return err
		}
		rules, err = skippedRules([]string{"lo"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if missing {
		testenv.Missing(t, "legacy iptables table filter", "a kernel with CONFIG_IP_NF_IPTABLES_LEGACY")
	}
	const want = "iptables (legacy) table filter: 1 entry beyond its empty built-in chains, rules in INPUT"
	if len(rules) != 1 || rules[0] != want {
		t.Errorf("skippedRules = %q, want [%q]", rules, want)
	}
}

// replaceFilterWithInputRule replaces the legacy filter table (its valid
// hooks INPUT, FORWARD, OUTPUT, now holding old entries) by one with a
// rule in INPUT and ACCEPT policies, as iptables-legacy writes it
// (IPT_SO_SET_REPLACE: struct ipt_replace, then the entries, of
// include/uapi/linux/netfilter_ipv4/ip_tables.h; amd64 and arm64 layout).
func replaceFilterWithInputRule(fd int, old uint32) error {
	const (
		entrySize    = 112 // struct ipt_entry, its counters 8-aligned
		stdSize      = 40  // XT_ALIGN(struct xt_standard_target)
		errSize      = 64  // XT_ALIGN(struct xt_error_target)
		replSize     = 96  // struct ipt_replace, up to its entries
		soSetReplace = 64  // IPT_SO_SET_REPLACE
	)
	le := binary.LittleEndian
	var entries []byte
	// standard appends an entry: protocol (0: any), source (0: any) and
	// a verdict (-NF_ACCEPT-1, -NF_DROP-1).
	standard := func(proto uint16, src [4]byte, verdict int32) {
		e := make([]byte, entrySize+stdSize)
		copy(e[0:4], src[:])
		if src != [4]byte{} {
			copy(e[8:12], []byte{255, 255, 255, 255}) // smsk /32
		}
		le.PutUint16(e[80:], proto)
		le.PutUint16(e[88:], entrySize)         // target_offset
		le.PutUint16(e[90:], entrySize+stdSize) // next_offset
		le.PutUint16(e[entrySize:], stdSize)    // target_size; name "": standard
		le.PutUint32(e[entrySize+32:], uint32(verdict))
		entries = append(entries, e...)
	}
	const accept, drop = -1 - 1, -0 - 1 // -NF_ACCEPT-1, -NF_DROP-1 (NF_DROP 0, NF_ACCEPT 1)
	var hookEntry, underflow [5]uint32
	hookEntry[unix.NF_INET_LOCAL_IN] = 0
	standard(unix.IPPROTO_UDP, [4]byte{198, 18, 1, 2}, drop)
	for _, h := range []int{unix.NF_INET_LOCAL_IN, unix.NF_INET_FORWARD, unix.NF_INET_LOCAL_OUT} {
		if h != unix.NF_INET_LOCAL_IN {
			hookEntry[h] = uint32(len(entries))
		}
		underflow[h] = uint32(len(entries))
		standard(0, [4]byte{}, accept)
	}
	e := make([]byte, entrySize+errSize)
	le.PutUint16(e[88:], entrySize)
	le.PutUint16(e[90:], entrySize+errSize)
	le.PutUint16(e[entrySize:], errSize)
	copy(e[entrySize+2:], "ERROR")
	copy(e[entrySize+32:], "ERROR")
	entries = append(entries, e...)

	counters := make([]byte, 16*old)
	repl := make([]byte, replSize, replSize+len(entries))
	copy(repl, "filter")
	le.PutUint32(repl[32:], 1<<unix.NF_INET_LOCAL_IN|1<<unix.NF_INET_FORWARD|1<<unix.NF_INET_LOCAL_OUT)
	le.PutUint32(repl[36:], 5) // num_entries
	le.PutUint32(repl[40:], uint32(len(entries)))
	for h := range 5 {
		le.PutUint32(repl[44+4*h:], hookEntry[h])
		le.PutUint32(repl[64+4*h:], underflow[h])
	}
	le.PutUint32(repl[84:], old) // num_counters: the old table's entries
	le.PutUint64(repl[88:], uint64(uintptr(unsafe.Pointer(&counters[0]))))
	repl = append(repl, entries...)
	err := unix.SetsockoptString(fd, unix.SOL_IP, soSetReplace, string(repl))
	runtime.KeepAlive(counters) // the kernel writes the old counters there
	return err
}
