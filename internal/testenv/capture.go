//go:build linux

package testenv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/topo"
)

// Capture is a tcpdump running in a namespace, writing a pcap file of
// Ethernet frames. Stop ends it (also at the end of the test).
type Capture struct {
	cmd     *exec.Cmd
	tcpdump string
	ns      *topo.NS
	file    string
	stopped bool
}

// StartCapture runs tcpdump (its path: Tool(t, "tcpdump", "tcpdump")) on
// dev in ns, writing file, with the capture filter's words in filter
// ("" for every frame), and returns once tcpdump captures (it fails t
// after 10 s). In immediate mode: otherwise the kernel hands tcpdump its
// frames a ring block at a time (TPACKET_V3, with a timeout), and one
// interrupted meanwhile writes none of the last block's, often all of a
// short test's (a leak check then reads an empty file).
func StartCapture(t testing.TB, tcpdump string, ns *topo.NS, dev, file, filter string) *Capture {
	t.Helper()
	args := append([]string{"-i", dev, "-n", "-U", "--immediate-mode", "-B", "8192", "-w", file}, strings.Fields(filter)...)
	cmd := ns.Command(tcpdump, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Capture{cmd: cmd, tcpdump: tcpdump, ns: ns, file: file}
	t.Cleanup(c.Stop)
	ready := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		var got []byte
		for {
			n, err := stderr.Read(buf)
			got = append(got, buf[:n]...)
			if bytes.Contains(got, []byte("listening on")) {
				ready <- nil
				io.Copy(io.Discard, stderr)
				return
			}
			if err != nil {
				ready <- fmt.Errorf("tcpdump on %s in %s: %v: %s", dev, ns.Name, err, got)
				return
			}
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("tcpdump on %s in %s did not start capturing within 10 s", dev, ns.Name)
	}
	return c
}

// Stop ends the capture (once; later calls do nothing) and returns its
// file.
func (c *Capture) Stop() {
	if !c.stopped {
		c.stopped = true
		c.cmd.Process.Signal(os.Interrupt)
		c.cmd.Wait()
	}
}

// File returns the pcap file the capture writes.
func (c *Capture) File() string { return c.file }

// Lines stops the capture and returns tcpdump's one-line decodes of it,
// with tcpdump's flags added (e.g. "-v").
func (c *Capture) Lines(t testing.TB, flags ...string) []string {
	t.Helper()
	c.Stop()
	out, err := c.ns.Run(c.tcpdump, append([]string{"-n", "-r", c.file}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(out, "\n")
}

// SendUDP sends n datagrams of 64 bytes (a sequence number first) from
// ns to dst; it fails t if one cannot be sent.
func SendUDP(t testing.TB, ns *topo.NS, dst netip.AddrPort, n int) {
	t.Helper()
	var c *net.UDPConn
	if err := ns.Do(func() (err error) {
		c, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := make([]byte, 64)
	for i := range n {
		binary.BigEndian.PutUint32(b, uint32(i))
		if _, err := c.Write(b); err != nil {
			t.Fatalf("send to %v: %v", dst, err)
		}
	}
}
