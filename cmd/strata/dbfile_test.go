package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A command that creates a database creates the file, not its directory:
// a missing one is an error that names it, with the mkdir that makes it,
// and nothing is made.
func TestCreate_MissingDirectory(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	src := replayed(t, nil, incident(t))
	transcript, err := filepath.Abs(filepath.Join("..", "..", "transcript", "testdata", "claude-code", "session.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string]func(db string) []string{
		"import": func(db string) []string { return []string{"import", "--format", "claude-code", "--db", db, transcript} },
		"replay": func(db string) []string { return []string{"replay", db, incident(t)} },
		"demo":   func(db string) []string { return []string{"demo", "--db", db} },
		"copy":   func(db string) []string { return []string{"copy", src, db} },
	} {
		dir := filepath.Join(work, name, "no such dir")
		db := filepath.Join(dir, "s.db")
		r := cli(t, "", args(db)...)
		wantCode(t, r, exitError, name)
		if want := db + ": the directory " + dir + " does not exist\nHint: create it first: mkdir -p " + shellQuote(dir) + "\n"; !strings.Contains(r.stderr, want) {
			t.Errorf("%s: stderr\n%s\nwithout\n%s", name, r.stderr, want)
		}
		if _, err := os.Stat(filepath.Join(work, name)); !os.IsNotExist(err) {
			t.Errorf("%s made a directory: %v", name, err)
		}
	}
}
