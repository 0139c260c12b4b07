package gateway

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestRoamingCitedOnce: every comment that cites the whitepaper for
// roaming cites its one section on it (§2.1, "Endpoints and roaming"),
// and keeps citing it as the code moves.
func TestRoamingCitedOnce(t *testing.T) {
	cite := regexp.MustCompile(`(?i)roam[^\n]*§\s*([0-9.]+)|§\s*([0-9.]+)[^\n]*roam`)
	root := ".."
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range cite.FindAllStringSubmatch(string(b), -1) {
			sec := m[1] + m[2]
			n++
			if strings.TrimSuffix(sec, ".") != "2.1" {
				t.Errorf("%s cites roaming as whitepaper §%s, want §2.1: %q", path, sec, m[0])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("no roaming citation found: the pattern no longer matches the code")
	}
}
