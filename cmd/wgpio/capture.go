//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/internal/acceptloop"
	"github.com/wgpio/wgpio/internal/plural"
)

// captureRequest is what `wgpio capture` sends on the capture socket, as
// one JSON line. The gateway answers with one JSON captureReply line and,
// if it has no error, a pcapng stream until either side closes.
type captureRequest struct {
	Port    string `json:"port"` // lan, wan or any
	Dir     string `json:"dir"`  // rx, tx or any
	Proto   uint8  `json:"proto,omitempty"`
	Host    string `json:"host,omitempty"`
	L4Port  uint16 `json:"l4port,omitempty"`
	SnapLen int    `json:"snaplen,omitempty"`
}

type captureReply struct {
	Error string `json:"error,omitempty"`
}

func (r captureRequest) filter() (fastpath.CaptureFilter, error) {
	var f fastpath.CaptureFilter
	switch r.Port {
	case "", "any":
	case "lan":
		f.Port = fastpath.CaptureLAN
	case "wan":
		f.Port = fastpath.CaptureWAN
	default:
		return f, fmt.Errorf("port %q: want lan, wan or any", r.Port)
	}
	switch r.Dir {
	case "", "any":
	case "rx":
		f.Dir = fastpath.CaptureRX
	case "tx":
		f.Dir = fastpath.CaptureTX
	default:
		return f, fmt.Errorf("direction %q: want rx, tx or any", r.Dir)
	}
	f.Proto, f.L4Port = r.Proto, r.L4Port
	if r.Host != "" {
		a, err := netip.ParseAddr(r.Host)
		if err != nil {
			return f, fmt.Errorf("host %q is not an IP address (give one IPv4 or IPv6 address, such as 198.18.1.2 or 2001:db8::2)", r.Host)
		}
		f.Host = a.Unmap()
	}
	return f, nil
}

var protoNames = map[string]uint8{"icmp": 1, "tcp": 6, "udp": 17, "icmp6": 58, "icmpv6": 58}

func cmdCapture(args []string) error {
	fs := flag.NewFlagSet("capture", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: wgpio capture [flags] NAME\n\nWrites what a running gateway's fast path receives and transmits as pcapng,\nwith the port (interface lan or wan) and the direction of every frame\n(tcpdump on the host no longer sees redirected traffic). tcpdump -r reads\nthe file but shows neither; tshark and Wireshark do, or capture one port\nand direction at a time with -port and -dir.\n\n")
		fs.PrintDefaults()
	}
	port := fs.String("port", "any", "gateway port: lan, wan or any")
	dir := fs.String("dir", "any", "direction: rx, tx or any")
	proto := fs.String("proto", "", "IP protocol: udp, tcp, icmp, icmp6 or a number (default any)")
	host := fs.String("host", "", "IP address that is the source or destination (outer header on the WAN)")
	l4port := fs.Int("l4port", 0, "UDP or TCP port that is the source or destination")
	snap := fs.Int("s", fastpath.DefaultCaptureSnapLen, "bytes kept of each frame")
	out := fs.String("w", "-", "pcapng `file` to write (- for stdout: a pipe or a file, not a terminal)")
	count := fs.Int("c", 0, "stop after this many frames (0: until Ctrl-C)")
	if err := parseFlags(fs, reorder(args)); err != nil {
		return err
	}
	switch {
	case fs.NArg() == 0:
		fs.Usage()
		return errors.New("capture: a gateway NAME is required (wgpio stats lists the running ones)")
	case fs.NArg() > 1:
		return fmt.Errorf("capture: one gateway NAME, got %d: %s", fs.NArg(), strings.Join(fs.Args(), " "))
	case *count < 0:
		return fmt.Errorf("capture: -c %d: want 0 (until Ctrl-C) or a number of frames", *count)
	case *snap < 1:
		return fmt.Errorf("capture: -s %d: want the number of bytes kept of each frame, 1 or more", *snap)
	}
	name := fs.Arg(0)
	if err := checkGatewayName(name); err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	req := captureRequest{Port: *port, Dir: *dir, Host: *host, SnapLen: *snap}
	if *l4port < 0 || *l4port > 65535 {
		return fmt.Errorf("capture: -l4port %d out of range 0-65535", *l4port)
	}
	req.L4Port = uint16(*l4port)
	if *proto != "" {
		if n, ok := protoNames[strings.ToLower(*proto)]; ok {
			req.Proto = n
		} else if n, err := strconv.ParseUint(*proto, 10, 8); err == nil {
			req.Proto = uint8(n)
		} else {
			return fmt.Errorf("capture: -proto %q: want udp, tcp, icmp, icmp6 or a number 0-255", *proto)
		}
	}
	if _, err := req.filter(); err != nil { // check before connecting
		return fmt.Errorf("capture: %w", err)
	}
	if *out == "-" && isTerminal(os.Stdout) {
		return fmt.Errorf("capture: standard output is a terminal, where pcapng is unreadable: write a file (-w %s.pcapng, then tshark -r %s.pcapng) or pipe it into a reader (wgpio capture %s | tshark -r -)", name, name, name)
	}

	path := filepath.Join(runDir, name+".capture")
	c, err := net.Dial("unix", path)
	if err != nil {
		return fmt.Errorf("capture: gateway %s: %w (%s)", name, err, dialHint(err, othersRunning(fmt.Sprintf("is `wgpio up` running in fastpath mode? capture is not available in compat mode (its frames reach wireguard-go through AF_XDP, past tcpdump's tap too: only the peers' and LAN hosts' sides show them); in compat-mqtun mode use tcpdump -i %s", name))))
	}
	defer c.Close()
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return fmt.Errorf("capture: send request: %w", err)
	}
	br := bufio.NewReader(c)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("capture: gateway %s: read reply: %w", name, err)
	}
	var rep captureReply
	if err := json.Unmarshal(line, &rep); err != nil {
		return fmt.Errorf("capture: gateway %s: bad reply: %w", name, err)
	}
	if rep.Error != "" {
		return fmt.Errorf("capture: gateway %s: %s", name, rep.Error)
	}

	var w io.Writer = os.Stdout
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			return fmt.Errorf("capture: %w", err)
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	defer bw.Flush()

	// Stop on a signal by closing the connection.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-sig:
			c.Close()
		case <-done:
		}
	}()

	// Copy the stream block by block, so that -c can count packets and
	// every block written is whole.
	frames := 0
	buf := make([]byte, 0, 65536)
	for first := true; *count == 0 || frames < *count; first = false {
		var bh [blockHeaderLen]byte
		if _, err := io.ReadFull(br, bh[:]); err != nil {
			if first {
				return fmt.Errorf("capture: read the gateway's pcapng header: %w", err)
			}
			break // the gateway stopped or we were interrupted
		}
		typ, n := binary.LittleEndian.Uint32(bh[0:]), int(binary.LittleEndian.Uint32(bh[4:]))
		if n < blockHeaderLen+4 || n%4 != 0 || n > maxBlockLen || first && typ != blockSHB {
			return fmt.Errorf("capture: bad pcapng block (type %#x, %d bytes) from the gateway", typ, n)
		}
		buf = buf[:n-blockHeaderLen]
		if _, err := io.ReadFull(br, buf); err != nil {
			break
		}
		bw.Write(bh[:])
		if _, err := bw.Write(buf); err != nil {
			return fmt.Errorf("capture: write: %w", err)
		}
		if typ == blockEPB {
			frames++
		}
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return fmt.Errorf("capture: write: %w", err)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("capture: write: %w", err)
	}
	fmt.Fprintf(os.Stderr, "%s captured\n", plural.Count(frames, "frame", "frames"))
	return nil
}

// isTerminal reports whether f is a terminal (the TCGETS ioctl answers).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// reorder moves flags before positional arguments, so that both
// `wgpio capture wg0 -port wan` and `wgpio capture -port wan wg0` work.
func reorder(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			flags = append(flags, a)
			if !strings.Contains(a, "=") && i+1 < len(args) && !isBoolFlag(a) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

func isBoolFlag(a string) bool {
	a = strings.TrimLeft(a, "-")
	return a == "h" || a == "help"
}

// maxCaptureRequest bounds a capture request's line, in bytes.
const maxCaptureRequest = 4096

// Bounds of the capture socket: captureConns connections served at once
// (one capture runs at a time, and another client is answered that it
// runs, or that its request is bad, within captureRequestTimeout), as
// many more waiting up to captureSlotWait for a place, the rest closed
// unanswered and logged (acceptloop.Server). Before, each connection had
// a goroutine and a 4 KiB buffer of its own for up to
// captureRequestTimeout, however many a client opened.
const (
	captureConns          = 4
	captureSlotWait       = 5 * time.Second
	captureRequestTimeout = 5 * time.Second
)

// captureServer answers `wgpio capture` on /var/run/wgpio/<name>.capture.
// One capture runs at a time.
type captureServer struct {
	e    *fastpath.Engine
	log  *slog.Logger
	ln   net.Listener
	path string
	busy sync.Mutex
	wg   sync.WaitGroup
}

func serveCapture(name string, e *fastpath.Engine, log *slog.Logger) (stop func(), err error) {
	path := filepath.Join(runDir, name+".capture")
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("capture socket %s: %w", path, err)
	}
	os.Chmod(path, 0o600) // frames are plaintext traffic: root's (or the service user's) only
	s := &captureServer{e: e, log: log, ln: ln, path: path}
	ctx, cancel := context.WithCancel(context.Background())
	conns := &acceptloop.Server{Conns: captureConns, Wait: captureSlotWait, Log: log, What: "capture socket"}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// Returns once its connections' handlers have.
		conns.Serve(ln, func(c net.Conn) { s.handle(ctx, c) })
	}()
	return func() {
		cancel()
		ln.Close()
		s.wg.Wait()
		os.Remove(path)
	}, nil
}

func (s *captureServer) handle(ctx context.Context, c net.Conn) {
	defer c.Close()
	reply := func(msg string) { json.NewEncoder(c).Encode(captureReply{Error: msg}) }
	c.SetReadDeadline(time.Now().Add(captureRequestTimeout))
	// The request is one short JSON line: read into the reader's buffer
	// only, so that a client sending a line without end (gigabytes in
	// the 5 s) costs no memory beyond it.
	br := bufio.NewReaderSize(c, maxCaptureRequest)
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		reply(fmt.Sprintf("bad request: longer than %d bytes", maxCaptureRequest))
		return
	}
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	var req captureRequest
	if err := json.Unmarshal(line, &req); err != nil {
		reply("bad request: " + err.Error())
		return
	}
	filter, err := req.filter()
	if err != nil {
		reply(err.Error())
		return
	}
	if !s.busy.TryLock() {
		reply("another capture is running on this gateway")
		return
	}
	defer s.busy.Unlock()
	capt, err := fastpath.NewCapture(fastpath.CaptureConfig{Filter: filter, SnapLen: req.SnapLen})
	if err != nil {
		reply(err.Error())
		return
	}
	if err := s.e.SetCapture(capt); err != nil {
		reply(err.Error())
		return
	}
	defer s.e.SetCapture(nil)
	reply("")
	s.log.Info("capture started", "port", filter.Port.String(), "dir", filter.Dir.String())

	// The client sends nothing more: a read returning means it left.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// When the gateway stops (or the client left), a write blocked on a
	// client that stopped reading (suspended with Ctrl-Z, piped into a
	// stuck reader) fails at once: stop waits for this handler.
	defer context.AfterFunc(ctx, func() { c.SetWriteDeadline(time.Now()) })()
	go func() {
		io.Copy(io.Discard, br)
		cancel()
	}()
	bw := bufio.NewWriterSize(c, 256<<10)
	snap := req.SnapLen
	if snap == 0 {
		snap = fastpath.DefaultCaptureSnapLen
	}
	pw, err := newPCAPWriter(bw, snap)
	if err == nil {
		err = bw.Flush()
	}
	// Write what the rings hold; when they are empty, flush, then wait.
	var fr fastpath.CapturedFrame
	for err == nil {
		if !capt.TryReadFrame(&fr) {
			if err = bw.Flush(); err != nil {
				break
			}
			if capt.ReadFrame(ctx, &fr) != nil {
				break // the client left, or the gateway stops
			}
		}
		err = pw.writePacket(fr.Time, fr.Port, fr.Dir, fr.Data, fr.OrigLen)
	}
	st := capt.Stats()
	s.log.Info("capture ended", "captured", st.Captured, "dropped", st.Dropped)
}
