// Package counts writes arrays of counters indexed by a reason as JSON
// objects by reason name, for the DropCounts types of the dataplane,
// fastpath, gateway and noise packages.
package counts

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Marshal writes the nonzero counts of c as a JSON object keyed by
// name(i) ({"replay": 3}).
func Marshal(c []uint64, name func(i int) string) ([]byte, error) {
	m := make(map[string]uint64)
	for i, n := range c {
		if n > 0 {
			m[name(i)] = n
		}
	}
	return json.Marshal(m)
}

// List returns the nonzero counts of c as "name=count" strings, sorted.
func List(c []uint64, name func(i int) string) []string {
	var out []string
	for i, n := range c {
		if n > 0 {
			out = append(out, fmt.Sprintf("%s=%d", name(i), n))
		}
	}
	sort.Strings(out)
	return out
}

// Unmarshal reads what Marshal writes into c, zeroing the counts it does
// not name. A name no index has is an error naming pkg.
func Unmarshal(b []byte, c []uint64, name func(i int) string, pkg string) error {
	var m map[string]uint64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	clear(c)
	for k, n := range m {
		i := 0
		for i < len(c) && name(i) != k {
			i++
		}
		if i == len(c) {
			return fmt.Errorf("%s: unknown drop reason %q", pkg, k)
		}
		c[i] = n
	}
	return nil
}
