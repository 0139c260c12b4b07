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
	} {
		f.Add([]byte(seed.data), seed.read, seed.piece)
	}
	f.Fuzz(func(t *testing.T, data []byte, read, piece uint8) {
		end := len(data)
		if len(data) > 0 && data[0] == '\n' {
			end = 1
		} else if i := bytes.Index(data, []byte("\n\n")); i >= 0 {
			end = i + 2
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
			if errors.Is(err, io.EOF) {
				break
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
