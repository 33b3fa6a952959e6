package companion_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/companion"
)

func TestIgnoreFiles(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing map[string]string // .gitignore files by their directory in the project
		file     string            // the .gitignore written to
		want     string            // its text after
		added    int
	}{
		{"none: beside the files", nil, ".claude/.gitignore", "/strata.db\n/strata.log\n", 2},
		{"the project's", map[string]string{".": "node_modules/"}, ".gitignore", "node_modules/\n/.claude/strata.db\n/.claude/strata.log\n", 2},
		{"beside wins", map[string]string{".": "x\n", ".claude": "/strata.log\n"}, ".claude/.gitignore", "/strata.log\n/strata.db\n", 1},
		{"all there", map[string]string{".claude": "strata.db\n/strata.log\n"}, ".claude/.gitignore", "strata.db\n/strata.log\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			project := t.TempDir()
			if err := os.Mkdir(filepath.Join(project, ".claude"), 0o755); err != nil {
				t.Fatal(err)
			}
			for dir, text := range tc.existing {
				if err := os.WriteFile(filepath.Join(project, dir, ".gitignore"), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			files := []string{filepath.Join(project, ".claude", "strata.db"), filepath.Join(project, ".claude", "strata.log")}
			ig, err := companion.IgnoreFiles(project, files...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(project, tc.file))
			if err != nil || ig.File != filepath.Join(project, tc.file) || string(got) != tc.want || len(ig.Added) != tc.added {
				t.Fatalf("%+v, %s holds %q (%v); want %q", ig, tc.file, got, err, tc.want)
			}
			again, err := companion.IgnoreFiles(project, files...)
			if err != nil || len(again.Added) != 0 || again.Created {
				t.Fatalf("again: %+v %v; want nothing added", again, err)
			}
			if after, _ := os.ReadFile(filepath.Join(project, tc.file)); !slices.Equal(after, got) {
				t.Fatalf("again changed %s", tc.file)
			}
		})
	}
	if _, err := companion.IgnoreFiles(t.TempDir(), "/elsewhere/strata.db"); !errors.Is(err, companion.ErrOutside) {
		t.Errorf("a file outside the project: %v, want ErrOutside", err)
	}
}
