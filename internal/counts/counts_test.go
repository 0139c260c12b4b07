package counts

import (
	"fmt"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	name := func(i int) string { return fmt.Sprintf("r%d", i) }
	c := []uint64{0, 3, 0, 7}
	b, err := Marshal(c, name)
	if err != nil || string(b) != `{"r1":3,"r3":7}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	back := []uint64{9, 9, 9, 9}
	if err := Unmarshal(b, back, name, "test"); err != nil || fmt.Sprint(back) != fmt.Sprint(c) {
		t.Errorf("Unmarshal = %v, %v; want %v", back, err, c)
	}
	if got := fmt.Sprint(List(c, name)); got != "[r1=3 r3=7]" {
		t.Errorf("List = %s, want [r1=3 r3=7]", got)
	}
	if err := Unmarshal([]byte(`{"r9":1}`), back, name, "test"); err == nil || err.Error() != `test: unknown drop reason "r9"` {
		t.Errorf("Unmarshal(unknown name) = %v", err)
	}
}
