//go:build linux

// Command scale measures wgpio as a concentrator of many peers: the
// configuration at 100,000 peers over the real UAPI socket, the handshake
// pool and a reconnect storm, the timer wheel, and the memory each peer
// costs. It builds real gateways in this process (memport for the data
// path), prints progress on standard error while it runs, and ends with
// one JSON object on the last line of standard output holding every
// figure it measured.
//
//	go run ./bench/scale                     # every part, 100,000 peers
//	go run ./bench/scale -peers 10000 -parts config
//	go run ./bench/scale -quick              # every part, small (the smoke test)
//
// Each part lives in a file of its own and registers itself with
// register; the figures it reports are named by the issue it measures.
//
// Linux only (network namespaces, netlink, madvise): every file is built
// for Linux alone.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// env is what every part gets: the run's flags and a progress writer.
type env struct {
	// Peers is the peer count of the large configurations (-peers).
	Peers int
	// Quick asks for a short run: smaller counts, shorter measurements.
	Quick bool
	// Progress receives human-readable progress lines.
	Progress io.Writer
}

// Logf prints one progress line on e.Progress.
func (e *env) Logf(format string, args ...any) {
	fmt.Fprintf(e.Progress, "scale: "+format+"\n", args...)
}

// part is one measurement. run adds its figures to out (keys as the
// issue names them) and returns an error when it could not measure: the
// run then fails, naming the part.
type part struct {
	name string
	run  func(e *env, out map[string]any) error
}

var parts []part

// register adds a part; parts run in the order of their names.
func register(name string, run func(e *env, out map[string]any) error) {
	parts = append(parts, part{name, run})
}

const usage = `usage: go run ./bench/scale [-quick] [-peers N] [-parts a,b]

Measures wgpio as a concentrator of many peers (README.md, "100,000
peers"): the configuration at -peers peers over the UAPI socket
(config), the handshake pool under a reconnect storm (handshake), the
memory each peer costs and the fast path's rate at 100,000 sessions
against one (memory), what the machine's caches answer in (machine). It
prints progress on standard error and one JSON object of every figure on
the last line of standard output; the figures keep their issues' names
(fastpath_100k_vs_1 at any -peers). Every part takes minutes at 100,000
peers; -quick runs them all small in about half a minute. Needs root
(it makes network namespaces). Compare builds in alternating
runs: on a shared machine the plain rate ratio moves with load from
elsewhere (fastpath_100k_vs_1_steady and _median leave the preempted
bursts out).

`

func names() []string {
	var n []string
	for _, p := range parts {
		n = append(n, p.name)
	}
	slices.Sort(n)
	return n
}

func main() {
	peers := flag.Int("peers", 100000, "peers of the large configurations")
	quick := flag.Bool("quick", false, "short run with small counts (the smoke test); -peers defaults to 2000")
	which := flag.String("parts", "", "comma-separated parts to run (default all: "+strings.Join(names(), ",")+")")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), usage)
		flag.PrintDefaults()
	}
	flag.Parse()
	e := &env{Peers: *peers, Quick: *quick, Progress: os.Stderr}
	if *quick && !flagSet("peers") {
		e.Peers = 2000
	}
	out, err := run(e, *which)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
	b, err := json.Marshal(out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
	fmt.Println(string(b))
}

// run runs the chosen parts (all when which is empty) and returns their
// figures, with the run's own parameters under "peers" and "seconds".
func run(e *env, which string) (map[string]any, error) {
	want := names()
	if which != "" {
		want = strings.Split(which, ",")
	}
	out := map[string]any{"peers": e.Peers}
	start := time.Now()
	for _, name := range want {
		i := slices.IndexFunc(parts, func(p part) bool { return p.name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("-parts: unknown part %q (have %s)", name, strings.Join(names(), ","))
		}
		e.Logf("part %s: start", parts[i].name)
		t := time.Now()
		if err := parts[i].run(e, out); err != nil {
			return nil, fmt.Errorf("part %s: %w", parts[i].name, err)
		}
		e.Logf("part %s: done in %.1f s", parts[i].name, time.Since(t).Seconds())
	}
	out["seconds"] = time.Since(start).Seconds()
	return out, nil
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
