package archtest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/directbridge/directbridge"

// rule is one row of ARCHITECTURE.md's code map.
type rule struct {
	row   int                 // its place in the table, from 0
	any   bool                // "any of the above"
	allow map[string][]string // package -> identifiers it may use ("" list: any)
}

var ticked = regexp.MustCompile("`([^`]+)`")

// readRules parses the code map table of ARCHITECTURE.md: the first
// column names packages, the last the packages they may import, each
// optionally followed by "(only `Name`, ...)".
func readRules(t *testing.T, path string) map[string]rule {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rules := map[string]rule{}
	sc := bufio.NewScanner(f)
	inTable := false
	row := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "| package | owns | may import |") {
			inTable = true
			continue
		}
		if !inTable {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cols := strings.Split(strings.Trim(line, "|"), "|")
		if len(cols) < 3 || strings.HasPrefix(strings.TrimSpace(cols[0]), "---") {
			continue
		}
		r := rule{row: row, allow: map[string][]string{}}
		row++
		last := strings.TrimSpace(cols[len(cols)-1])
		if last == "any of the above" {
			r.any = true
		} else if last != "" {
			for _, m := range regexp.MustCompile("`([^`]+)`(?: \\(only ([^)]*)\\))?").FindAllStringSubmatch(last, -1) {
				var only []string
				for _, id := range ticked.FindAllStringSubmatch(m[2], -1) {
					only = append(only, id[1])
				}
				r.allow[m[1]] = only
			}
		}
		for _, m := range ticked.FindAllStringSubmatch(cols[0], -1) {
			rules[m[1]] = r
		}
	}
	if len(rules) == 0 {
		t.Fatal("no code map table in ARCHITECTURE.md")
	}
	for pkg, r := range rules {
		for dep := range r.allow {
			if d, ok := rules[dep]; !ok || d.row >= r.row {
				t.Errorf("ARCHITECTURE.md lets %s import %s, which is not on a row above it", pkg, dep)
			}
		}
	}
	return rules
}

// TestImportsFollowArchitecture: every package of the module (tests
// aside) imports only the packages its row of ARCHITECTURE.md allows,
// every package has a row, and a package allowed only some identifiers
// of another uses no other.
func TestImportsFollowArchitecture(t *testing.T) {
	root := filepath.Join("..", "..")
	rules := readRules(t, filepath.Join(root, "ARCHITECTURE.md"))
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{.Dir}}|{{join .Imports \" \"}}|{{join .GoFiles \" \"}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.Split(line, "|")
		pkg := strings.TrimPrefix(strings.TrimPrefix(parts[0], module), "/")
		if pkg == "internal/archtest" {
			continue
		}
		r, ok := rules[pkg]
		if !ok {
			t.Errorf("%s has no row in ARCHITECTURE.md's code map", pkg)
			continue
		}
		if r.any {
			continue
		}
		for _, imp := range strings.Fields(parts[2]) {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			only, allowed := r.allow[dep]
			if !allowed {
				t.Errorf("%s imports %s, which ARCHITECTURE.md does not allow it", pkg, dep)
				continue
			}
			if len(only) > 0 {
				checkOnly(t, pkg, parts[1], strings.Fields(parts[3]), dep, only)
			}
		}
	}
}

// checkOnly reports uses of dep's identifiers other than only in the
// non-test files of pkg.
func checkOnly(t *testing.T, pkg, dir string, files []string, dep string, only []string) {
	t.Helper()
	name := dep[strings.LastIndex(dep, "/")+1:]
	use := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\.([A-Z]\w*)`)
	allowed := map[string]bool{}
	for _, id := range only {
		allowed[id] = true
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			for _, m := range use.FindAllStringSubmatch(line, -1) {
				if !allowed[m[1]] {
					t.Errorf("%s/%s uses %s.%s; ARCHITECTURE.md allows it only %v of %s", pkg, f, name, m[1], only, dep)
				}
			}
		}
	}
}
