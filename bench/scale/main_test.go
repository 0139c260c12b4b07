//go:build linux

package main

import (
	"encoding/json"
	"io"
	"testing"
)

// TestQuick runs every part small (as -quick does) and checks that each
// part delivered figures and that the result is one JSON object.
func TestQuick(t *testing.T) {
	if len(parts) == 0 {
		t.Fatal("no parts registered")
	}
	e := &env{Peers: 2000, Quick: true, Progress: io.Discard}
	if testing.Verbose() {
		e.Progress = testWriter{t}
	}
	out, err := run(e, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("result is not one JSON object: %v", err)
	}
	for _, k := range wantKeys {
		if _, ok := back[k]; !ok {
			t.Errorf("figure %q missing from %s", k, b)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }
