package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/strata-go/strata/internal/dbtest"
)

func TestRun_Usage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "Error: a command is required\nHint: run 'strata --help' for usage\n"},
		{[]string{"frobnicate"}, `Error: unknown command "frobnicate" for "strata"`},
		{[]string{"--frob"}, "Error: unknown flag: --frob\n"},
		{[]string{"stats", "--frob", "x.db"}, "Error: unknown flag: --frob\nHint: run 'strata stats --help' for usage\n"},
	} {
		r := cli(t, "", tc.args...)
		wantCode(t, r, exitUsage, tc.args...)
		if !strings.HasPrefix(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("%v: stdout %q stderr %q, want %q", tc.args, r.stdout, r.stderr, tc.want)
		}
	}
}

func TestRun_Help(t *testing.T) {
	t.Parallel()
	out := mustCLI(t, "--help")
	for _, c := range []string{"replay", "dump", "resume", "verify", "backup", "stats", "sessions"} {
		if !strings.Contains(out, "  "+c+" ") {
			t.Errorf("help lacks %s:\n%s", c, out)
		}
		if sub := mustCLI(t, c, "--help"); !strings.Contains(sub, "--timeout") {
			t.Errorf("%s --help lacks --timeout:\n%s", c, sub)
		}
	}
	if strings.Contains(mustCLI(t, "verify", "--help"), "in-process") {
		t.Errorf("verify --help shows the hidden --in-process")
	}
}

// Commands that read a database leave its file byte for byte unchanged.
func TestReadOnly_FileUnchanged(t *testing.T) {
	t.Parallel()
	db := replayed(t, []string{"--every", "2", "--fold", "2", "--summarizer", "lossy", "--drop", "negatives"}, incident(t))
	info, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	before := readBytes(t, db)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"dump", db},
		{"dump", "--raw", db},
		{"dump", "--json", "--raw", db},
		{"dump", "--session", "mig", db},
		{"resume", "--db", db, "--session", "mig"},
		{"resume", "--db", db, "--session", "mig", "--json", "--marker", "1"},
		{"verify", db},
		{"stats", db},
		{"stats", "--json", db},
		{"stats", "--json", "--session", "mig", db},
		{"sessions", db},
		{"sessions", "--json", db},
		{"resume", db, "--session", "mig"},
		{"dump", "--json", "--session", "mig", "--from", "3", "--to", "9", db},
		{"verify", "--json", db},
		{"backup", db, filepath.Join(dir, "copy.db")},
		{"backup", "--json", db, filepath.Join(dir, "copy2.db")},
		{"backup", db, "-"},
	} {
		mustCLI(t, args...)
		if after := readBytes(t, db); !bytes.Equal(before, after) {
			t.Fatalf("strata %s changed the database file", strings.Join(args, " "))
		}
		if fi, err := os.Stat(db); err != nil || fi.Mode() != info.Mode() {
			t.Fatalf("strata %s changed the file's mode", strings.Join(args, " "))
		}
	}
	dbtest.MustVerify(t, db)
}

// The --help of the root command and of every command that takes a
// database says that DB may be a postgres:// URL, as well as a file (and,
// for the reading commands, a debug handler's URL); import says it of its
// --db.
func TestHelp_PostgresURL(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "sessions", "dump", "verify", "stats", "resume", "backup", "import", "serve", "copy", "replay"} {
		args := []string{"--help"}
		if name != "" {
			args = []string{name, "--help"}
		}
		out := mustCLI(t, args...)
		if name != "import" && !regexp.MustCompile(`(?s)file.{0,40}postgres:// URL`).MatchString(out) {
			t.Errorf("strata %s --help does not say DB may be a file or a postgres:// URL:\n%s", name, out)
		}
		if name == "import" && !regexp.MustCompile(`--db string +store and compact in this database, a file .* or a postgres:// URL`).MatchString(out) {
			t.Errorf("strata import --help: --db does not say it may be a postgres:// URL:\n%s", out)
		}
	}
}
