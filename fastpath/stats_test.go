package fastpath

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestDropCountsJSON: drops travel as an object of nonzero counts by reason
// name (wgpio stats -json) and read back exactly; an unknown name is an
// error.
func TestDropCountsJSON(t *testing.T) {
	var d DropCounts
	d[DropReplay], d[DropNoRoute] = 3, 7
	b, err := json.Marshal(QueueStats{Drops: d})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`"drops":{"%s":7,"%s":3}`, DropNoRoute, DropReplay)
	if DropReplay.String() < DropNoRoute.String() {
		want = fmt.Sprintf(`"drops":{"%s":3,"%s":7}`, DropReplay, DropNoRoute)
	}
	if !strings.Contains(string(b), want) {
		t.Errorf("JSON %s, want it to contain %s", b, want)
	}
	var q QueueStats
	if err := json.Unmarshal(b, &q); err != nil || q.Drops != d {
		t.Errorf("read back %v, %v; want %v", q.Drops, err, d)
	}
	if err := json.Unmarshal([]byte(`{"drops":{"no_such_reason":1}}`), &q); err == nil {
		t.Errorf("an unknown reason was accepted")
	}
}
