package config

import (
	"strconv"
	"strings"
)

// Error is one problem in a configuration file. Its Error method formats it as
//
//	<File>:<Line>: key "<Key>": <Msg>    a problem with one key's value
//	<File>:<Line>: <Msg>                 a problem with a line or a section
//	<File>: <Msg>                        a problem with the whole file (Line 0)
//
// for example
//
//	wg0.conf:12: key "ListenPort": port 70000 out of range 1-65535
//
// Msg never contains a private or pre-shared key. Parse returns every Error it
// finds, joined with errors.Join; use errors.As to get the first, or the
// Unwrap() []error method of the joined error to walk them all.
type Error struct {
	File string // the name given to Parse
	Line int    // 1-based; 0 when the problem is not on one line
	Key  string // key name: canonical for known keys, as written for unknown ones; "" when none
	Msg  string
	// Err is the underlying error, if any (a resolver's or a reader's).
	Err error
}

func (e *Error) Error() string { return format(e.File, e.Line, e.Key, e.Msg) }

// Unwrap returns the underlying error, if any.
func (e *Error) Unwrap() error { return e.Err }

// Warning is something Parse accepted but wgpio does not act on, or a setting
// that is legal but probably not what was meant. String formats it as Error
// does.
type Warning struct {
	File string
	Line int
	Key  string
	Msg  string
	// More, when not 0, makes this Warning the summary of a kind
	// (MaxWarningsPerKind): it stands for More warnings not listed. Line
	// is then 0.
	More int
}

func (w Warning) String() string { return format(w.File, w.Line, w.Key, w.Msg) }

func format(file string, line int, key, msg string) string {
	var b strings.Builder
	b.WriteString(file)
	if line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(line))
	}
	b.WriteString(": ")
	if key != "" {
		b.WriteString("key ")
		b.WriteString(strconv.Quote(key))
		b.WriteString(": ")
	}
	b.WriteString(msg)
	return b.String()
}
