//go:build linux

package testenv

import (
	"strconv"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/internal/topo"
)

// SNMP reads the counter name of group ("Icmp", "Ip", "Udp", ...) from
// ns's kernel: /proc/net/snmp as a process in ns sees it.
func SNMP(t testing.TB, ns *topo.NS, group, name string) uint64 {
	t.Helper()
	out, err := ns.Run("cat", "/proc/net/snmp")
	if err != nil {
		t.Fatalf("read /proc/net/snmp in %s: %v", ns.Name, err)
	}
	return SNMPValue(t, []byte(out), group, name)
}

// SNMPValue returns the counter name of group in snmp, the text of
// /proc/net/snmp: a line of names after "group:", then one of values.
func SNMPValue(t testing.TB, snmp []byte, group, name string) uint64 {
	t.Helper()
	lines := strings.Split(string(snmp), "\n")
	for i := 0; i+1 < len(lines); i++ {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != group+":" || len(values) != len(names) || values[0] != group+":" {
			continue
		}
		for j, n := range names {
			if n == name {
				v, err := strconv.ParseUint(values[j], 10, 64)
				if err != nil {
					t.Fatalf("/proc/net/snmp %s %s: %v", group, name, err)
				}
				return v
			}
		}
	}
	t.Fatalf("/proc/net/snmp has no %s %s:\n%s", group, name, snmp)
	return 0
}
