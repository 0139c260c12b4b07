// Package counts is the one implementation of the drop-reason counters that
// every package counting drops uses (dataplane, fastpath, gateway, noise,
// bind, tundev, header): a reason type's names, its counts array, JSON by
// name and sorted "name=count" lists.
//
// A package declares its reasons as constants of a uint8 type with a
// String method and a names table, and gets the rest from here:
//
//	type DropReason uint8
//	const (
//		DropA DropReason = iota
//		DropB
//		NumDropReasons
//	)
//	var dropNames = [NumDropReasons]string{DropA: "a", DropB: "b"}
//	func (r DropReason) String() string { return counts.Name(dropNames[:], r) }
//	type DropCounts = counts.Counts[DropReason]
//	const _ = counts.MaxReasons - NumDropReasons // no more than MaxReasons
//
// Adding a reason is then a constant and its name, nothing else.
package counts

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
)

// Reason is a drop-reason type: a small enumeration whose String is its
// name. Its values index Counts. A reason type whose JSON key (and metric
// label) differs from its String, implements Keyer too.
type Reason interface {
	~uint8
	String() string
}

// Keyer is implemented by a reason type whose JSON key and metric label is
// not its String (gateway's and noise's, whose String has spaces).
type Keyer interface {
	Key() string
}

// MaxReasons is the most reasons one type may have: the length of Counts.
// A package checks its count at compile time with
// const _ = counts.MaxReasons - NumDropReasons.
const MaxReasons = 64

// Unknown is the name of a value past a type's reasons.
const Unknown = "unknown"

// Name returns names[r], or Unknown when r is past the table or has no name:
// the body of a reason type's String method.
func Name[R ~uint8](names []string, r R) string {
	if int(r) < len(names) && names[r] != "" {
		return names[r]
	}
	return Unknown
}

// Key is r's JSON key and metric label: its Key method's result if it has
// one, else its String.
func Key[R Reason](r R) string {
	if k, ok := any(r).(Keyer); ok {
		return k.Key()
	}
	return r.String()
}

// Counts counts events by reason, indexed by reason (entries past the
// type's last reason stay zero). The zero value is ready to use; it is a
// plain array with no lock (see Atomic for concurrent writers). In JSON it
// is an object of the nonzero counts by Key ({"replay": 3}), which
// UnmarshalJSON reads back; an unknown name is an error.
//
// Its length is MaxReasons, not the type's count: where zero counts matter
// (one metric per reason), range over the reasons (for r := range
// NumDropReasons), not over the array.
type Counts[R Reason] [MaxReasons]uint64

// MarshalJSON writes the nonzero counts by reason key.
func (c Counts[R]) MarshalJSON() ([]byte, error) {
	m := make(map[string]uint64)
	for i, n := range c {
		if n > 0 {
			m[Key(R(i))] = n
		}
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON writes, zeroing the counts it does not
// name. A name no reason has is an error naming the reason type's package.
func (c *Counts[R]) UnmarshalJSON(b []byte) error {
	var m map[string]uint64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	clear(c[:])
	for k, n := range m {
		i := 0
		for i < MaxReasons && (Key(R(i)) != k || k == Unknown) {
			i++
		}
		if i == MaxReasons {
			return fmt.Errorf("%s: unknown drop reason %q", pkgName[R](), k)
		}
		c[i] = n
	}
	return nil
}

// pkgName is the last element of R's package path.
func pkgName[R any]() string {
	p := reflect.TypeFor[R]().PkgPath()
	return p[strings.LastIndexByte(p, '/')+1:]
}

// List returns the nonzero counts as "key=count" strings, sorted; empty
// when nothing was counted.
func (c Counts[R]) List() []string {
	var out []string
	for i, n := range c {
		if n > 0 {
			out = append(out, fmt.Sprintf("%s=%d", Key(R(i)), n))
		}
	}
	sort.Strings(out)
	return out
}

// Add adds o's counts to c.
func (c *Counts[R]) Add(o *Counts[R]) {
	for i, n := range o {
		c[i] += n
	}
}

// Total is the sum of the counts.
func (c Counts[R]) Total() uint64 {
	var t uint64
	for _, n := range c {
		t += n
	}
	return t
}

// Atomic counts events by reason for concurrent writers and readers: each
// count is an atomic, added to once per event or per burst, read at any
// time with Load. The zero value is ready to use.
type Atomic[R Reason] [MaxReasons]atomic.Uint64

// Add adds n events of reason r.
func (a *Atomic[R]) Add(r R, n uint64) { a[r].Add(n) }

// Load returns the counts, each read atomically (the whole not).
func (a *Atomic[R]) Load() Counts[R] {
	var c Counts[R]
	a.LoadAdd(&c)
	return c
}

// LoadAdd adds the counts to c, each read atomically.
func (a *Atomic[R]) LoadAdd(c *Counts[R]) {
	for i := range a {
		if n := a[i].Load(); n > 0 {
			c[i] += n
		}
	}
}
