package gateway

// The UAPI socket: its limits, the connections it serves, and a set request
// read in batches as it arrives (ipcSetConn).

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"golang.zx2c4.com/wireguard/ipc"

	"github.com/wgpio/wgpio/internal/uapiserve"
)

// Limits of the UAPI server. Memory: each connection holds at most a
// read buffer of uapiMaxLine and a batch of uapiBatchBytes of lines, and at
// most uapiMaxConns connections are served at once (as many more wait,
// without buffers, up to uapiSlotWait; more are refused), so all of them
// together hold under 40 MiB whatever they
// send; a set request of any size (a 1,000,000-peer setconf) is applied
// batch by batch as it arrives. The get replies they hold at once are
// bounded apart (Device.getReplies: 64 MiB, or one larger reply).
const (
	// uapiMaxLine is the longest line accepted (64 KiB, newline included);
	// a longer one is read to its end, discarded, and the request answered
	// with errno EMSGSIZE.
	uapiMaxLine    = 64 << 10
	uapiBatchBytes = 256 << 10
	// uapiMaxConns connections are served at once, and one over them
	// waits uapiSlotWait at most for a place before it is refused
	// (uapiserve.Refuse; acceptloop.Server): the bound of every mode's UAPI
	// socket, uapiserve's MaxConns and SlotWait (why these values: there).
	uapiMaxConns = uapiserve.MaxConns
	uapiSlotWait = uapiserve.SlotWait
	// uapiIdleTimeout bounds how long a request may go without a full
	// batch (or its end) arriving, a connection without a request, and a
	// reply without uapiWriteChunk of it being taken by the reader.
	uapiIdleTimeout = 10 * time.Second
	// uapiOpTimeout bounds how long a connection may wait before it
	// sends an operation line (wg(8) sends its own at once).
	uapiOpTimeout = 2 * time.Second
	// uapiWriteChunk is how much of a reply one write deadline covers.
	uapiWriteChunk = 256 << 10
)

// stallWriter writes to conn in chunks of uapiWriteChunk bytes, each
// under a fresh write deadline idle from its start: a client that stops
// reading a reply (a stopped `wg show`, a script that never reads) frees
// its connection and its slot of uapiMaxConns after idle, while one that
// reads a long reply slowly is not cut off.
//
// st tells the device's reply budget (Device.getReplies) of the client's
// progress, and the writer of a reply the budget cut (its client took
// nothing of it for uapiserve.ReplyStall while other gets waited for
// room): its writes then fail with uapiserve.ErrReplyCut.
type stallWriter struct {
	conn net.Conn
	idle time.Duration
	st   *uapiserve.WriteState
}

func (w stallWriter) Write(b []byte) (n int, err error) {
	w.st.Moved()
	for len(b) > 0 {
		c := min(len(b), uapiWriteChunk)
		w.conn.SetWriteDeadline(time.Now().Add(w.idle))
		if err := w.st.Check(); err != nil {
			return n, err
		}
		m, err := w.conn.Write(b[:c])
		n += m
		if err != nil {
			if cerr := w.st.Check(); cerr != nil {
				err = cerr
			}
			return n, err
		}
		w.st.Moved()
		b = b[c:]
	}
	return n, nil
}

var errLineTooLong = uapiErrorf(-int64(syscall.EMSGSIZE), "line longer than %d bytes", uapiMaxLine)

// readLine reads one line from r without its newline, into the reader's
// buffer (valid until the next read). A line longer than uapiMaxLine is read
// to its end and discarded: errLineTooLong. At EOF without a newline the
// partial line is returned with io.EOF.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		for err == bufio.ErrBufferFull {
			_, err = r.ReadSlice('\n')
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		return nil, errLineTooLong
	}
	return bytes.TrimSuffix(line, []byte("\n")), err
}

// ipcSetConn applies a set=1 request read from conn line by line, in
// batches of up to uapiBatchBytes: a batch is read without holding Device.mu
// (a client that stalls holds no lock the handshakes or timers need) and
// applied under it; what the request changed is published once, at its end,
// but for the peers it created, which join the dataplane at the end of
// their batch (joinCreatedLocked): once the lock is released a handshake
// may come for them.
// setMu keeps set requests from interleaving, as wireguard-go's ipcMutex
// does; it is taken once the first batch has arrived, so that a client
// that stalls before its first batch holds it not at all.
//
// A request cut short leaves what wireguard-go's line-by-line IpcSet
// leaves, wherever the batches fall: every whole line before the cut
// applied, nothing after it. The cut is the first line that fails, a line
// longer than uapiMaxLine (errLineTooLong), or a read error (the client
// stalled past uapiIdle), or a last line without its newline: a client
// that went away in the middle of "listen_port=51820" (EOF after
// "listen_port=518"), or of "allowed_ip=10.0.0.0/24", whose cut-off line
// wireguard-go's scanner applies (a listen port of 518, a /2). EOF after
// a whole line ends the request, as in wireguard-go. A line's CR before its newline is dropped, as
// wireguard-go's scanner drops it (on its socket too). After an error the rest of the request is read and
// discarded, so that the connection stays in step.
func (d *Device) ipcSetConn(conn net.Conn, r *bufio.Reader) (err error) {
	defer conn.SetReadDeadline(time.Time{})
	b := setBatch{buf: make([]byte, 0, uapiBatchBytes+uapiMaxLine)}
	// The first batch is read before setMu is taken, so that clients
	// that stall at once wait out their uapiIdle side by side rather
	// than one after another: each of them holding the lock for its
	// whole timeout kept a reload waiting 60 s behind six "set=1" lines,
	// and `wg show` over ten minutes behind uapiMaxConns of them (each
	// holds a place while it waits for the lock).
	done, cut := b.read(conn, r, d.uapiIdle, false)
	d.setMu.Lock()
	defer d.setMu.Unlock()
	// After finishSetLocked, out of d.mu: the dataplane's work of the
	// change (fastgw's routes), as IpcSet waits for it.
	defer d.waitApplied()
	var st setState
	defer func() {
		d.mu.Lock()
		ferr := d.finishSetLocked(&st)
		d.mu.Unlock()
		if lerr := d.finishSet(&st); ferr == nil {
			ferr = lerr
		}
		if err == nil {
			err = ferr
		}
	}()
	var failed error // the first error: nothing after it is applied
	for {
		if failed == nil {
			d.mu.Lock()
			start := 0
			for _, end := range b.ends {
				if failed = d.setLineLocked(&st, string(b.buf[start:end])); failed != nil {
					break
				}
				start = end
			}
			// The peers created join the dataplane before the
			// lock is released: a handshake may come for them.
			d.joinCreatedLocked()
			d.mu.Unlock()
		}
		if failed == nil {
			failed = cut
		}
		if done {
			return failed
		}
		done, cut = b.read(conn, r, d.uapiIdle, failed != nil)
	}
}

// setBatch is the batch of lines of a set request that ipcSetConn applies
// at once: buf holds them back to back, without their newlines, ends
// where each ends.
type setBatch struct {
	buf  []byte
	ends []int
}

// read reads the next batch of a set request from r, up to uapiBatchBytes
// of lines, allowing the client idle to send it. done: the request ended
// (its blank line, EOF, or a read error). cut: what ends the request
// within this batch, after the lines read (a line too long, a read error,
// a last line without its newline). discarding: the request failed
// already, and lines too long are skipped on the way to its end.
func (b *setBatch) read(conn net.Conn, r *bufio.Reader, idle time.Duration, discarding bool) (done bool, cut error) {
	conn.SetReadDeadline(time.Now().Add(idle))
	b.buf, b.ends = b.buf[:0], b.ends[:0]
	for len(b.buf) < uapiBatchBytes {
		line, rerr := readLine(r)
		if rerr == errLineTooLong {
			if discarding {
				continue // discarding up to the end of the request
			}
			return false, rerr // the lines before it are applied
		}
		if rerr != nil && rerr != io.EOF {
			return true, uapiErrorf(ipc.IpcErrorIO, "read set request: %w", rerr)
		}
		// A CR before the newline is dropped, as IpcSet's and
		// wireguard-go's bufio.Scanner drops it (ScanLines).
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 { // the blank line, or EOF (wireguard-go accepts it)
			return true, nil
		}
		if rerr == io.EOF {
			// A line without its newline: the client went away in
			// the middle of it ("listen_port=518" of 51820). wg(8)
			// ends every line.
			return true, uapiErrorf(ipc.IpcErrorInvalid, "set request ends without a newline after %q: not applied", logStart(string(line)))
		}
		b.buf = append(b.buf, line...)
		b.ends = append(b.ends, len(b.buf))
	}
	return false, nil
}

// ServeUAPI answers configuration requests on conn until it fails or
// closes: "get=1\n\n" and "set=1\n...\n\n", each answered with
// "errno=N\n\n" (after the get output). It closes conn. Lines are at most
// 64 KiB; a set request is applied as it arrives (ipcSetConn) and may be of
// any length. A client that stalls for 10 s (uapiIdleTimeout), reading or
// being read from (stallWriter), is disconnected; one that sends no
// operation for uapiOpTimeout (2 s) too, so that silent connections, which
// hold one of the uapiMaxConns places each, keep `wg show` waiting 2 s,
// not 10 (64 of them did). A get takes room for its reply in
// d.getReplies before it formats it (uapiserve.Budget): it waits up to
// uapiserve.ReplyWait for room, meanwhile cutting the replies their
// clients took nothing of for uapiserve.ReplyStall, and without room is
// answered errno EBUSY.
func (d *Device) ServeUAPI(conn net.Conn) {
	defer conn.Close()
	st := new(uapiserve.WriteState)
	rw := bufio.NewReadWriter(bufio.NewReaderSize(conn, uapiMaxLine), bufio.NewWriter(stallWriter{conn, d.uapiIdle, st}))
	for {
		conn.SetReadDeadline(time.Now().Add(min(d.uapiIdle, uapiOpTimeout)))
		opb, err := readLine(rw.Reader)
		if err != nil {
			if err == errLineTooLong {
				d.warnUAPI(fmt.Errorf("invalid UAPI operation: %w", err))
				fmt.Fprintf(rw, "errno=%d\n\n", errLineTooLong.Code)
				rw.Flush()
			}
			return
		}
		op := string(opb)
		switch op {
		case "set=1":
			err = d.ipcSetConn(conn, rw.Reader)
		case "get=1":
			// The blank line ending the request, under the same
			// deadline as the operation line.
			var c byte
			if c, err = rw.ReadByte(); err != nil {
				return
			}
			conn.SetReadDeadline(time.Time{})
			if c != '\n' {
				err = uapiErrorf(ipc.IpcErrorInvalid, "trailing byte %q after get=1", c)
				break
			}
			// Room for the reply first (d.getReplies): the replies of
			// clients that do not read are held until they are cut.
			size := d.getReplySize()
			var h *uapiserve.Hold
			if h, err = d.getReplies.Acquire(size, conn, st, 0); err != nil {
				break
			}
			growSendBuffer(conn, size)
			err = d.ipcGet(rw.Writer, h)
			d.getReplies.Release(h)
		default:
			d.warnUAPI(fmt.Errorf("invalid UAPI operation %q (%d bytes)", logStart(op), len(op)))
			return
		}
		var code int64
		if err != nil {
			var ue *UAPIError
			var be *uapiserve.Error
			if errors.As(err, &ue) {
				code = ue.Code
			} else if errors.As(err, &be) {
				code = be.Code
			} else {
				code = ipc.IpcErrorUnknown
			}
			d.warnUAPI(err)
		}
		fmt.Fprintf(rw, "errno=%d\n\n", code)
		if rw.Flush() != nil {
			return
		}
	}
}

// serveUAPI accepts and serves the connections of l, d.uapi (uapiserve.Listen),
// until Close closes it, uapiMaxConns at once (d.uapiConns): a connection
// over them waits up to uapiSlotWait for one to end, then is refused
// (uapiserve.Refuse) and counted (Stats.UAPIRefused); a failed accept
// (EMFILE) is logged and tried again. It returns once every connection it
// served has ended. The caller did d.wg.Add(1) for it.
func (d *Device) serveUAPI(l net.Listener) {
	defer d.wg.Done()
	d.uapiConns.Serve(l, d.ServeUAPI)
}
