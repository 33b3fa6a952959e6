package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestBackup(t *testing.T) {
	t.Parallel()
	src := replayed(t, []string{"--every", "2", "--fold", "2", "--summarizer", "lossy", "--drop", "artifacts"}, incident(t))
	want := mustCLI(t, "dump", "--json", "--raw", src)
	wantCtx := resume(t, src, "mig")

	dir := t.TempDir()
	file := filepath.Join(dir, "copy.db")
	out := mustCLI(t, "backup", src, file)
	if !regexp.MustCompile(`^backup ` + regexp.QuoteMeta(file) + ` bytes=\d+\n$`).MatchString(out) {
		t.Errorf("stdout %q", out)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}

	r := cli(t, "", "backup", src, "-")
	wantCode(t, r, exitOK)
	stdoutCopy := filepath.Join(t.TempDir(), "stdout.db")
	if err := os.WriteFile(stdoutCopy, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal([]byte(r.stdout), readBytes(t, file)) {
		t.Errorf("the copy on stdout differs from the copy in a file")
	}

	for _, copy := range []string{file, stdoutCopy} {
		if out := mustCLI(t, "verify", copy); out != "ok\n" {
			t.Errorf("verify %s: %q", copy, out)
		}
		if got := mustCLI(t, "dump", "--json", "--raw", copy); got != want {
			t.Errorf("dump of %s differs:\n%s", copy, firstDiff(got, want))
		}
		if got := resume(t, copy, "mig"); got.SHA256 != wantCtx.SHA256 {
			t.Errorf("resume from %s: sha256 %s, want %s", copy, got.SHA256, wantCtx.SHA256)
		}
	}

	// Over an existing file: replaced whole.
	if err := os.WriteFile(file, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "backup", src, file)
	if out := mustCLI(t, "verify", file); out != "ok\n" {
		t.Errorf("verify after overwrite: %q", out)
	}
}

func TestBackup_Errors(t *testing.T) {
	t.Parallel()
	src := replayed(t, nil, incident(t))
	wantCode(t, cli(t, "", "backup", src), exitUsage)
	wantCode(t, cli(t, "", "backup", src, "a", "b"), exitUsage)

	r := cli(t, "", "backup", src, src)
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "the database itself") {
		t.Errorf("stderr %q", r.stderr)
	}
	r = cli(t, "", "backup", src, filepath.Join(t.TempDir(), "no", "such", "dir", "x.db"))
	wantCode(t, r, exitError)
	r = cli(t, "", "backup", src+".absent", filepath.Join(t.TempDir(), "x.db"))
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("stderr %q", r.stderr)
	}
}
