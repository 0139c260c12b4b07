package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkParse parses the sample gateway file (not a hot path: run once at
// start and on reload; the figure is for scale).
//
//	go test ./config -run '^$' -bench Parse -benchmem
func BenchmarkParse(b *testing.B) {
	text, err := os.ReadFile(filepath.Join("testdata", "gateway.conf"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := testOpts.Parse("gateway.conf", strings.NewReader(string(text))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUAPI renders the sample gateway file for IpcSet.
func BenchmarkUAPI(b *testing.B) {
	f, err := testOpts.Load(filepath.Join("testdata", "gateway.conf"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = f.UAPI()
	}
}
