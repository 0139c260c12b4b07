// Package uapiserve answers the WireGuard cross-platform userspace API
// (UAPI, https://www.wireguard.com/xplatform/) on one connection for a
// stock wireguard-go device whose set operation must be followed by work
// of the caller's before it is acknowledged (the compat modes: the LAN's
// XDP filter, the TUN's no_route table).
package uapiserve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"

	"github.com/wgpio/wgpio/internal/acceptloop"
)

// Coder is an error that carries the (negative) errno of its UAPI reply;
// wireguard-go's *device.IPCError is one.
type Coder interface {
	error
	ErrorCode() int64
}

// Errno is the value of a reply's errno line for err: 0 for nil, the code
// of the first Coder in err's chain, else EINVAL (a malformed request).
func Errno(err error) int64 {
	if err == nil {
		return 0
	}
	var c Coder
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	return ipc.IpcErrorInvalid
}

// Serve answers the get=1 and set=1 operations on c until the client
// closes it or sends anything else (logged on log; a line of more than
// 4,096 bytes without its newline ends the connection too): a get with dev's
// IpcGetOperation, a set with set, which reads the operation's lines from
// r (wireguard-go's IpcSetOperation, and the caller's work after it)
// before the errno line (Errno) is written. r ends (io.EOF) after the
// operation's blank line, so that a client may write its operations
// before reading the answers (opReader); what set leaves of its
// operation is skipped. Closes c. One goroutine per connection; set must
// be safe for concurrent use across connections.
//
// A client that stalls is disconnected after idleTimeout: one that sends
// no operation, or waits that long in all to send the next progressBytes
// of a set=1 (or its end: opReader; the first progressBytes are read
// before set is called, readAhead, so that one stalling within them
// holds no lock), or to take the next progressBytes of
// a reply (stallWriter). A get takes room for its reply in Replies
// before wireguard-go formats it: without room within ReplyWait it is
// answered errno EBUSY.
// wireguard-go holds its IPC lock while it reads a set's lines and while
// it writes a get's reply, so that without these bounds one `set=1` line
// and nothing after it (a client stopped mid-request), or a get whose
// reply was never read, held every other operation of every connection,
// `wg show` and the gateway's reload (whose SIGTERM then waited for it)
// until the client went away, as the fast path's socket never did.
func Serve(c net.Conn, dev *device.Device, set func(r io.Reader) error, log *slog.Logger) {
	defer c.Close()
	st := new(WriteState)
	r, w := bufio.NewReader(c), bufio.NewWriter(stallWriter{c, st})
	for {
		c.SetReadDeadline(time.Now().Add(idleTimeout))
		// An operation line is short: one longer than r's buffer (a
		// client sending no newline) ends the connection rather than
		// growing a string without bound.
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			log.Warn("UAPI: operation line too long; closing the connection", "start", string(line[:16]))
			return
		}
		if err != nil {
			return
		}
		op := string(line)
		switch op {
		case "set=1\n":
			o := &opReader{r: r, atLine: true, conn: c}
			err = set(o.readAhead())
			// What set left of the operation (it stopped at an error) is
			// not the next one. A client gone or cut (a line cut short:
			// opReader) is answered, in case it still reads (a write
			// side shut down), then the connection ends.
			if _, derr := io.Copy(io.Discard, o); derr != nil {
				if err == nil {
					err = derr
				}
				log.Warn("UAPI: set request cut short; closing the connection", "err", err)
				fmt.Fprintf(w, "errno=%d\n\n", Errno(err))
				w.Flush()
				return
			}
		case "get=1\n":
			// The operation line is followed by a blank line.
			if b, rerr := r.ReadByte(); rerr != nil {
				return
			} else if b != '\n' {
				err = fmt.Errorf("get=1 followed by %q, not a blank line", b)
				break
			}
			// Room for the reply first (Replies): wireguard-go formats
			// it whole and holds it until the client has taken it.
			h, berr := Replies.Acquire(int(lastReply.Load()), c, st, 0)
			if berr != nil {
				log.Warn("UAPI: get refused", "err", berr)
				err = berr
				break
			}
			err = dev.IpcGetOperation(replyWriter{w, h})
			Replies.Release(h)
		default:
			log.Warn("UAPI: unknown operation; closing the connection", "op", logStart(op), "bytes", len(op))
			return
		}
		if _, werr := fmt.Fprintf(w, "errno=%d\n\n", Errno(err)); werr != nil {
			return
		}
		if w.Flush() != nil {
			return
		}
	}
}

// opReader yields the rest of one operation from r, up to and with the
// blank line that ends it, then io.EOF. wireguard-go's IpcSetOperation
// reads through a bufio.Scanner, which reads ahead: given the
// connection's reader itself, it took the start of the next operation
// with it (a client that wrote a set and a get before reading saw only
// the set answered).
//
// With conn set, the client has idleTimeout of waiting for it, reads from
// conn added up, to send each progressBytes of the operation: a long
// operation arriving steadily is read whole however long the device
// takes to apply it, one that stalls or trickles is cut.
type opReader struct {
	r      *bufio.Reader
	atLine bool // at the start of a line
	done   bool
	conn   net.Conn      // nil: no deadline
	taken  int           // bytes taken since waited was reset
	waited time.Duration // in reads from conn since then
}

func (o *opReader) Read(p []byte) (int, error) {
	if o.done {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if o.r.Buffered() == 0 {
		if err := o.fill(1); err != nil {
			return 0, err
		}
	}
	// Whole lines only: a line is handed on once the buffer holds it to
	// its newline (a piece at a time to a small p), as wireguard-go's
	// scanner applies a last line without its newline when the read
	// fails (a client gone in the middle of "listen_port=51820" set port
	// 518). A line longer than the buffer, which no valid line is, goes
	// as it comes.
	for {
		all, _ := o.r.Peek(o.r.Buffered())
		if bytes.IndexByte(all, '\n') >= 0 || len(all) == o.r.Size() {
			break
		}
		if err := o.fill(len(all) + 1); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, fmt.Errorf("set request cut within a line: %w", err)
		}
	}
	b, _ := o.r.Peek(min(len(p), o.r.Buffered()))
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1] // not the start of a line after it
	}
	n := len(b)
	if o.atLine && b[0] == '\n' {
		n, o.done = 1, true
	} else if i := bytes.Index(b, []byte("\n\n")); i >= 0 {
		n, o.done = i+2, true
	}
	copy(p, b[:n])
	o.atLine = b[n-1] == '\n'
	o.r.Discard(n)
	o.taken += n
	return n, nil
}

// readAhead reads the operation's first progressBytes (its whole lines,
// up to its blank line) before set takes wireguard-go's IPC lock, in what
// remains of idleTimeout, and returns a reader of the whole operation:
// those lines, then the rest from o, or o's error where the client
// stalled or went away (Read meets it again at once: the time is spent).
// A client that stalls within its first progressBytes so holds no lock
// while it stalls: wireguard-go read the set's lines under its IPC lock,
// and `wg show`, every set and the reload waited for the client's
// idleTimeout behind one that stopped after its first 4 KiB (the
// connection's buffer), N such clients N times idleTimeout one after
// another. The lines held are at most progressBytes and a line, and only
// while the set is read.
func (o *opReader) readAhead() io.Reader {
	var head []byte
	for len(head) < progressBytes && !o.done {
		if len(head) == cap(head) {
			head = append(head, make([]byte, 4096)...)[:len(head)]
		}
		n, err := o.Read(head[len(head):cap(head)])
		head = head[:len(head)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return io.MultiReader(bytes.NewReader(head), errReader{err})
		}
	}
	return io.MultiReader(bytes.NewReader(head), o)
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// fill reads more of the operation from the connection into o.r, until it
// holds want bytes, under the deadline of what remains of idleTimeout for
// the current progressBytes.
func (o *opReader) fill(want int) error {
	if o.conn == nil {
		_, err := o.r.Peek(want)
		return err
	}
	if o.taken >= progressBytes {
		o.taken, o.waited = 0, 0
	}
	start := time.Now()
	o.conn.SetReadDeadline(start.Add(idleTimeout - o.waited))
	_, err := o.r.Peek(want)
	o.waited += time.Since(start)
	return err
}

// MaxConns and SlotWait bound the connections of every mode's UAPI socket
// (NewServer):
// MaxConns served at once, as many more waiting up to SlotWait for a
// place, the rest refused (Refuse) and counted. Tens of `wg show` and
// `wg set` at the same moment (a monitoring loop per peer group, a reload,
// an operator), each done in milliseconds to a second, never meet
// MaxConns; 64 clients that hold their connections do. SlotWait is longer
// than the idle timeout (idleTimeout here, gateway's uapiIdleTimeout), the
// longest a client that makes no progress keeps its place, so that a `wg
// show` beside clients that hold connections open and send nothing, or
// stall, is served late but served; refused are those behind 64 clients
// that all keep making progress (64 long set requests at once), or behind
// 64 other connections waiting already. Before, each connection was served
// in a goroutine of its own however many there were.
const (
	MaxConns = 64
	SlotWait = 15 * time.Second
)

// RefusalGet and RefusalSet are the replies of every mode's UAPI socket
// to a get and to a set it refuses (over MaxConns and SlotWait, above):
// the errno line that ends any reply (the cross-platform userspace
// implementation page, wireguard.com/xplatform), with EAGAIN, and the
// empty line. wg(8) reads a get's errno as a positive number and a set's
// as a negative one (wireguard-tools, ipc-uapi.h; wireguard-go writes
// its codes negative, ipc.IpcError*): so answered, it fails with "Unable
// to access interface: Resource temporarily unavailable" (or "Unable to
// modify interface: ..."), where a connection closed unanswered gave
// "Protocol error" (get) or "Connection reset by peer" (set).
var (
	RefusalGet = []byte(fmt.Sprintf("errno=%d\n\n", syscall.EAGAIN))
	RefusalSet = []byte(fmt.Sprintf("errno=%d\n\n", -int(syscall.EAGAIN)))
)

// Refuse answers a connection the UAPI socket refuses
// (acceptloop.Server.Refuse): RefusalSet when its request begins with
// "set=1", RefusalGet otherwise (a get, or nothing within the
// connection's read deadline, acceptloop.RefuseTime: a set that late
// fails with "Unknown error -11"). The rest of the request, up to its
// empty line, is read and discarded first (within the same deadline),
// applied never: wg(8) writes a whole request before it reads, and a
// set of a few KiB or more met a closed socket (SIGPIPE: wg died without
// a word), a get a reset.
func Refuse(c net.Conn) {
	var buf [4096]byte
	n, _ := io.ReadFull(c, buf[:6])
	reply := RefusalGet
	if string(buf[:n]) == "set=1\n" {
		reply = RefusalSet
	}
	if n == 6 {
		discardRequest(c, buf[:], buf[5])
	}
	c.SetWriteDeadline(time.Now().Add(acceptloop.RefuseTime))
	c.Write(reply) // the client may be gone: nothing to do then
}

// discardRequest reads c up to the end of a UAPI request (an empty line:
// two line feeds in a row, the first of them possibly prev, the last
// byte read before) or until a read fails (its deadline), into buf.
func discardRequest(c net.Conn, buf []byte, prev byte) {
	for {
		n, err := c.Read(buf)
		for _, b := range buf[:n] {
			if b == '\n' && prev == '\n' {
				return
			}
			prev = b
		}
		if err != nil {
			return
		}
	}
}

// NewServer returns the server of a UAPI socket (every mode's: the fast
// path's in package gateway, the compat modes'): MaxConns connections at
// once, SlotWait, refusals answered (Refuse), its failed accepts and
// refusals logged on log. The caller serves the socket with its Serve (a
// compat mode each connection with this package's Serve) and reports
// Refused among its counters.
func NewServer(log *slog.Logger) *acceptloop.Server {
	return &acceptloop.Server{Conns: MaxConns, Wait: SlotWait, Refuse: Refuse, Log: log, What: "UAPI socket"}
}

// Bounds on a stalled client (Serve). idleTimeout is a variable for the
// tests.
const progressBytes = 256 << 10

var idleTimeout = 10 * time.Second

// stallWriter writes to conn in pieces of at most progressBytes, each
// under a fresh write deadline of idleTimeout: a client that stops
// reading a reply is cut off, one that reads a long reply slowly is not.
// st tells Replies of the client's progress, and the writer of a reply
// Replies cut (ReplyStall): its writes then fail with ErrReplyCut.
type stallWriter struct {
	conn net.Conn
	st   *WriteState
}

func (w stallWriter) Write(b []byte) (n int, err error) {
	w.st.Moved()
	for len(b) > 0 {
		k := min(len(b), progressBytes)
		w.conn.SetWriteDeadline(time.Now().Add(idleTimeout))
		if err := w.st.Check(); err != nil {
			return n, err
		}
		m, err := w.conn.Write(b[:k])
		n += m
		if err != nil {
			if cerr := w.st.Check(); cerr != nil {
				err = cerr
			}
			return n, err
		}
		w.st.Moved()
		b = b[k:]
	}
	return n, nil
}

// Replies bounds the get replies the process's UAPI connections (Serve)
// hold at once: wireguard-go formats a reply whole, about 330 bytes a
// peer, and holds it, and its IPC lock, until the client has taken it.
var Replies Budget

// lastReply is the size of the last get reply Serve wrote, in bytes: the
// room the next get takes before wireguard-go formats its reply (the
// write corrects it: replyWriter).
var lastReply atomic.Int64

func init() { lastReply.Store(64 << 10) }

// replyWriter writes a get's reply to w, telling Replies its size first:
// wireguard-go writes the reply it formatted in one Write.
type replyWriter struct {
	w *bufio.Writer
	h *Hold
}

func (r replyWriter) Write(p []byte) (int, error) {
	lastReply.Store(int64(len(p)))
	Replies.Resize(r.h, len(p))
	return r.w.Write(p)
}

// logStart is what a log line quotes of a client's line: its first 64
// bytes (an operation line may be up to 4 KiB, and each connection that
// sends an unknown one is logged).
func logStart(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
