package config

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sync"
)

// defaultResolve is DefaultResolve (tests replace it).
var defaultResolve = DefaultResolve

// pendingEndpoint is an Endpoint written as a host name, left for
// resolvePending: f.Peers[peer]'s, at line, port port.
type pendingEndpoint struct {
	peer, line int
	host       string
	port       uint16
}

// resolvePending looks up the host names of p.pending with
// DefaultResolve, each name once and up to MaxResolving at a time, then
// sets each peer's Endpoint (or adds its error) in the file's order, as
// endpoint would have as it met them. As reading stops at MaxErrors
// problems, so do the lookups (a batch of MaxResolving at a time): the
// endpoints of names not looked up are left unset.
func (p *parser) resolvePending() {
	if len(p.pending) == 0 {
		return
	}
	type answer struct {
		addrs  []netip.Addr
		err    error
		looked bool
	}
	answers := map[string]*answer{}
	var hosts []string
	for _, e := range p.pending {
		if answers[e.host] == nil {
			answers[e.host] = &answer{}
			hosts = append(hosts, e.host)
		}
	}
	failed, stopped := 0, false
	for start := 0; start < len(hosts); start += MaxResolving {
		if len(p.errs)+failed >= MaxErrors {
			stopped = true
			break
		}
		batch := hosts[start:min(start+MaxResolving, len(hosts))]
		var wg sync.WaitGroup
		for _, h := range batch {
			a := answers[h]
			wg.Add(1)
			go func() {
				defer wg.Done()
				a.addrs, a.err = defaultResolve(h)
			}()
		}
		wg.Wait()
		for _, h := range batch {
			a := answers[h]
			a.looked = true
			if a.err != nil {
				failed++
			}
		}
	}
	for _, e := range p.pending {
		if a := answers[e.host]; a.looked {
			p.resolved(e.line, &p.f.Peers[e.peer], e.host, e.port, a.addrs, a.err)
		}
	}
	p.pending = nil
	// The lookups' errors go to their lines among the others.
	slices.SortStableFunc(p.errs, func(a, b error) int { return cmp.Compare(errLine(a), errLine(b)) })
	if stopped {
		p.errs = append(p.errs, &Error{File: p.f.Name, Msg: fmt.Sprintf("too many errors (%d); stopped resolving Endpoint host names", MaxErrors)})
	}
}

// errLine is the line of a parse error, lines without one last.
func errLine(err error) int {
	var e *Error
	if errors.As(err, &e) && e.Line > 0 {
		return e.Line
	}
	return math.MaxInt
}
