package uapiserve

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// FuzzOpReader feeds arbitrary bytes after a "set=1" line to opReader,
// read in chunks of arbitrary sizes from a connection that delivers
// arbitrary pieces: it yields exactly the operation (up to and with the
// blank line that ends it: a first line that is blank, else the first
// "\n\n"; or everything, at EOF), then io.EOF, and leaves the rest, the
// next operation, unread in the connection's reader. A slow, obvious
// reference (bytes.Index over the whole input) gives the split.
//
//	go test ./internal/uapiserve -run '^$' -fuzz FuzzOpReader -fuzztime 60s
func FuzzOpReader(f *testing.F) {
	for _, seed := range []struct {
		data        string
		read, piece uint8
	}{
		{"listen_port=1\n\nget=1\n\n", 7, 3},               // an operation, then the next
		{"\nset=1\n", 1, 1},                                // blank first line: an empty operation
		{"a=1\nb=2\n", 64, 0},                              // no blank line: all of it, then EOF
		{"a=1\n\n\n\n", 2, 1},                              // blank lines after the end are the next operation's
		{"x\n" + string(make([]byte, 40)) + "\n\n", 5, 17}, // longer than the reader's buffer
		{"a=1\nlisten_port=518", 64, 1},                    // cut within its last line: not handed on
		{"a=1\n" + string(make([]byte, 40)), 3, 2},         // cut within a line longer than the buffer
	} {
		f.Add([]byte(seed.data), seed.read, seed.piece)
	}
	f.Fuzz(func(t *testing.T, data []byte, read, piece uint8) {
		end := len(data)
		// cut: the operation ends in a line without its newline, which
		// is not handed on (the read fails) unless it is longer than
		// the reader's buffer (16 bytes: it goes as it comes).
		// long: such a line of 16 bytes or more, handed on in pieces:
		// all of it then EOF, or the read fails at its end after the
		// whole lines before it (whole bytes) and a piece of it.
		cut, long, whole := false, false, 0
		if len(data) > 0 && data[0] == '\n' {
			end = 1
		} else if i := bytes.Index(data, []byte("\n\n")); i >= 0 {
			end = i + 2
		} else if last := len(data) - 1 - bytes.LastIndexByte(data, '\n'); last > 0 && last < 16 {
			end, cut = len(data)-last, true
		} else if last >= 16 {
			long, whole = true, len(data)-last
		}
		var src io.Reader = bytes.NewReader(data)
		if piece%2 == 1 {
			src = iotest.OneByteReader(src)
		} else if piece%4 == 2 {
			src = iotest.HalfReader(src)
		}
		r := bufio.NewReaderSize(src, 16) // the smallest bufio buffer: many refills
		o := &opReader{r: r, atLine: true}
		var got []byte
		buf := make([]byte, max(int(read)%32, 1))
		for {
			n, err := o.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if cut && errors.Is(err, io.ErrUnexpectedEOF) {
				if !bytes.Equal(got, data[:end]) {
					t.Fatalf("cut operation = %q, want its whole lines %q", got, data[:end])
				}
				return
			}
			if long && errors.Is(err, io.ErrUnexpectedEOF) {
				if len(got) < whole || !bytes.HasPrefix(data, got) {
					t.Fatalf("cut long line: operation = %q, want its whole lines %q and a piece of the last", got, data[:whole])
				}
				return
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if n == 0 {
				t.Fatalf("Read = 0, nil with a %d-byte buffer", len(buf))
			}
		}
		if !bytes.Equal(got, data[:end]) {
			t.Fatalf("operation = %q, want %q", got, data[:end])
		}
		if n, err := o.Read(buf); n != 0 || err != io.EOF {
			t.Fatalf("Read after the operation = %d, %v; want 0, EOF", n, err)
		}
		rest, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rest, data[end:]) {
			t.Fatalf("left in the reader %q, want %q", rest, data[end:])
		}
	})
}
