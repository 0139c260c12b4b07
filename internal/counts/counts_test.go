package counts

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

type reason uint8

const (
	rA reason = iota
	rB
	rC
	numReasons
)

var names = [numReasons]string{rA: "a", rB: "b c"} // rC has no name

func (r reason) String() string { return Name(names[:], r) }

// keyed has a Key method: its JSON key differs from String.
type keyed uint8

func (r keyed) String() string { return Name(names[:], r) }
func (r keyed) Key() string    { return strings.ReplaceAll(r.String(), " ", "_") }

const _ = MaxReasons - numReasons

func TestName(t *testing.T) {
	for _, tt := range []struct {
		r    reason
		want string
	}{{rA, "a"}, {rB, "b c"}, {rC, Unknown}, {numReasons, Unknown}, {200, Unknown}} {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("reason(%d).String() = %q, want %q", tt.r, got, tt.want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	var c Counts[reason]
	c[rA], c[rB] = 7, 3
	b, err := json.Marshal(c)
	if err != nil || string(b) != `{"a":7,"b c":3}` {
		t.Fatalf("Marshal = %s, %v; want {\"a\":7,\"b c\":3}", b, err)
	}
	back := Counts[reason]{rC: 9}
	if err := json.Unmarshal(b, &back); err != nil || back != c {
		t.Errorf("Unmarshal(%s) = %v, %v; want %v", b, back[:numReasons], err, c[:numReasons])
	}
	if got := fmt.Sprint(c.List()); got != "[a=7 b c=3]" {
		t.Errorf("List = %s, want [a=7 b c=3]", got)
	}
	if err := json.Unmarshal([]byte(`{"zz":1}`), &back); err == nil || err.Error() != `counts: unknown drop reason "zz"` {
		t.Errorf("Unmarshal(unknown name) = %v, want counts: unknown drop reason \"zz\"", err)
	}
	if err := json.Unmarshal([]byte(`{"unknown":1}`), &back); err == nil {
		t.Errorf("Unmarshal(%q) = nil, want an error", Unknown)
	}
	if c.Total() != 10 {
		t.Errorf("Total = %d, want 10", c.Total())
	}
}

func TestKeyer(t *testing.T) {
	var c Counts[keyed]
	c[rB] = 2
	b, _ := json.Marshal(c)
	if string(b) != `{"b_c":2}` {
		t.Errorf("Marshal = %s, want {\"b_c\":2}", b)
	}
	var back Counts[keyed]
	if err := json.Unmarshal(b, &back); err != nil || back != c {
		t.Errorf("Unmarshal = %v, %v", back[:3], err)
	}
	if got := fmt.Sprint(c.List()); got != "[b_c=2]" {
		t.Errorf("List = %s, want [b_c=2]", got)
	}
}

func TestAtomic(t *testing.T) {
	var a Atomic[reason]
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				a.Add(rB, 1)
			}
		}()
	}
	wg.Wait()
	a.Add(rA, 5)
	c := a.Load()
	if c[rA] != 5 || c[rB] != 4000 || c.Total() != 4005 {
		t.Errorf("Load = %v, want [5 4000 0]", c[:numReasons])
	}
	a.LoadAdd(&c)
	if c[rB] != 8000 {
		t.Errorf("LoadAdd: %d, want 8000", c[rB])
	}
	var sum Counts[reason]
	sum.Add(&c)
	if sum != c {
		t.Errorf("Add = %v, want %v", sum[:numReasons], c[:numReasons])
	}
}
