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
		"backup": func(db string) []string { return []string{"backup", src, db} },
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

// An empty database argument is an error that says so, whatever the
// command, and nothing is made.
func TestDatabase_Empty(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"replay", "", incident(t)}, {"dump", ""}, {"resume", "", "--session", "mig"}} {
		r := cli(t, "", args...)
		wantCode(t, r, exitError, args[0])
		if want := "Error: store: no database given: the path is empty\nHint: name a database file, or a postgres:// URL\n"; r.stderr != want {
			t.Errorf("%s: stderr\n%s\nwant\n%s", args[0], r.stderr, want)
		}
	}
}
