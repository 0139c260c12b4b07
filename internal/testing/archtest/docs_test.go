package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The module's root, from this package's directory.
const root = "../../.."

// section returns the text of the Markdown file doc under the heading
// head (a whole line, "## Name") up to the next heading of its level or
// above.
func section(t *testing.T, doc, head string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+head+"\n")
	if i < 0 {
		t.Fatalf("%s has no heading %q", doc, head)
	}
	s = s[i+len(head)+2:]
	level := head[:strings.IndexByte(head, ' ')+1] // "## "
	for j := 0; j < len(s); {
		k := strings.IndexByte(s[j:], '\n')
		if k < 0 {
			break
		}
		line := s[j : j+k]
		for l := 2; l <= len(level)-1; l++ { // a heading of its level or above
			if strings.HasPrefix(line, strings.Repeat("#", l)+" ") {
				return s[:j]
			}
		}
		j += k + 1
	}
	return s
}

// directImports lists the module's packages with the module packages
// they import directly, tests left out, as this system (Linux) builds
// them.
func directImports(t *testing.T) map[string][]string {
	t.Helper()
	imps := make(map[string][]string)
	for name, p := range listModule(t) {
		imps[name] = p.Imports
	}
	return imps
}

// notLibrary selects what ARCHITECTURE.md's table of arrows leaves out:
// commands, examples, benchmarks, tools, scripts and test harnesses.
var notLibrary = anyOf("cmd", "examples", "bench", "tools", "scripts", "internal/testing", "internal/twosite", "internal/topo", "internal/testenv")

// splitList splits a table cell's comma-separated list ("nothing": none).
func splitList(cell string) []string {
	cell = strings.TrimSpace(cell)
	if cell == "nothing" || cell == "" {
		return nil
	}
	var out []string
	for _, s := range strings.Split(cell, ",") {
		out = append(out, strings.TrimSpace(s))
	}
	return out
}

// arrowsTable reads ARCHITECTURE.md's "Arrows that exist": each package
// named in a row's first cell, with the imports of its second.
func arrowsTable(t *testing.T) map[string][]string {
	t.Helper()
	rows := make(map[string][]string)
	for _, line := range strings.Split(section(t, "ARCHITECTURE.md", "### Arrows that exist"), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| package") || strings.HasPrefix(line, "| ---") {
			continue
		}
		for _, p := range splitList(cells[1]) {
			if _, dup := rows[p]; dup {
				t.Errorf("ARCHITECTURE.md, Arrows that exist: %s has two rows", p)
			}
			rows[p] = splitList(cells[2])
		}
	}
	return rows
}

// TestArrowsTable: ARCHITECTURE.md's "Arrows that exist" names every
// library package once, with exactly the module packages it imports.
func TestArrowsTable(t *testing.T) {
	table := arrowsTable(t)
	pkgs := directImports(t)
	if len(table) < 20 || len(pkgs) < 20 {
		t.Fatalf("%d rows, %d packages: the table or go list was not read", len(table), len(pkgs))
	}
	for p, imps := range pkgs {
		if notLibrary(p) {
			continue
		}
		listed, ok := table[p]
		if !ok {
			t.Errorf("%s imports %v and has no row in ARCHITECTURE.md's Arrows that exist", p, imps)
			continue
		}
		for _, d := range imps {
			if !slices.Contains(listed, d) {
				t.Errorf("%s imports %s, which its row in ARCHITECTURE.md's Arrows that exist does not list", p, d)
			}
		}
		for _, d := range listed {
			if !slices.Contains(imps, d) {
				t.Errorf("ARCHITECTURE.md's Arrows that exist says %s imports %s: it does not", p, d)
			}
		}
	}
	for p := range table {
		if _, ok := pkgs[p]; !ok || notLibrary(p) {
			t.Errorf("ARCHITECTURE.md's Arrows that exist has a row for %s, not a library package of the module", p)
		}
	}
}

// TestLayersNamePackages: ARCHITECTURE.md's "Layers" names every package
// of the module (by its path, or under a directory it describes whole:
// "examples/", "bench/").
func TestLayersNamePackages(t *testing.T) {
	layers := section(t, "ARCHITECTURE.md", "## Layers")
	pic := layers[:strings.Index(layers, "### ")] // the picture, not the tables
	whole := []string{"examples", "bench"}        // described as a whole
	for p := range modulePackages(t) {
		if slices.ContainsFunc(whole, func(d string) bool { return under(p, d) }) {
			continue
		}
		// By its path, or a tail of it in a list under its parent
		// ("stacktest (whole stack ...)", "kwg/kwgecho (...)").
		named := regexp.MustCompile(`(^|[\s,(])` + regexp.QuoteMeta(p) + `([\s,)]|$)`).MatchString(pic)
		for elems := strings.Split(p, "/"); len(elems) > 1 && !named; elems = elems[1:] {
			named = regexp.MustCompile(`[\s,(]` + regexp.QuoteMeta(strings.Join(elems[1:], "/")) + ` \(`).MatchString(pic)
		}
		if !named {
			t.Errorf("ARCHITECTURE.md's Layers does not name %s", p)
		}
	}
}

// TestFastpathFiles: the table "The files of `fastpath`" names each of
// its files.
func TestFastpathFiles(t *testing.T) {
	table := section(t, "ARCHITECTURE.md", "## Fast path")
	files, err := filepath.Glob(filepath.Join(root, "fastpath", "*.[gs]*"))
	if err != nil || len(files) < 20 {
		t.Fatalf("fastpath's files: %d, %v", len(files), err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasSuffix(name, "_test.go") || name == "doc.go" || !(strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".s")) {
			continue
		}
		if !strings.Contains(table, "`"+name+"`") {
			t.Errorf("ARCHITECTURE.md's table of fastpath's files does not name %s", name)
		}
	}
}

// TestPortabilityListed: README's "Portability" names every package of
// the module, in its portable list or its Linux-only one: by its path, a
// tail of it ("kwg/kwgecho", "gen" in a list under `bench/internal/`), or
// a directory it names whole ("tools/...").
func TestPortabilityListed(t *testing.T) {
	text := section(t, "README.md", "## Portability")
	for p := range modulePackages(t) {
		elems := strings.Split(p, "/")
		found := false
		for i := range elems {
			tail, dir := strings.Join(elems[i:], "/"), strings.Join(elems[:i+1], "/")
			found = found || strings.Contains(text, "`"+tail+"`") || strings.Contains(text, "`"+dir+"/...`")
		}
		if !found {
			t.Errorf("README's Portability does not say whether %s is portable or Linux only", p)
		}
	}
}
