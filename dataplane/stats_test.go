package dataplane

import (
	"encoding/json"
	"testing"
)

func TestDropCountsJSON(t *testing.T) {
	s := Stats{RXPackets: 5}
	s.Drops[DropTooLong] = 3
	s.Drops[DropRunt] = 1
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Drops map[string]uint64 }
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Drops) != 2 || m.Drops["too_long"] != 3 || m.Drops["runt"] != 1 {
		t.Errorf("Drops in JSON = %v (%s), want {runt: 1, too_long: 3}", m.Drops, b)
	}
	var back Stats
	if err := json.Unmarshal(b, &back); err != nil || back.Drops != s.Drops || back.RXPackets != 5 {
		t.Errorf("round trip = %+v, %v; want %+v", back, err, s)
	}
	var d DropCounts
	if err := json.Unmarshal([]byte(`{"no_such_reason": 1}`), &d); err == nil {
		t.Error("an unknown reason name was accepted")
	}
}
