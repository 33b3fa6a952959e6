package main

import (
	"bytes"
	"encoding/json"
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
	if !regexp.MustCompile(`^backup ` + regexp.QuoteMeta(file) + ` bytes=\d+ sessions=1\n$`).MatchString(out) {
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

// --json says what was written; DEST a directory (or a name ending in /)
// is bad usage and leaves nothing in it; DEST - with --json is bad usage;
// DEST - to a character device that is no terminal (/dev/null) is not
// refused.
func TestBackup_JSONAndDest(t *testing.T) {
	t.Parallel()
	src := replayed(t, nil, incident(t), writeFile(t, "x.jsonl", `{"session":"other","kind":"user","text":"hi"}`+"\n"))
	dir := t.TempDir()
	dest := filepath.Join(dir, "copy.db")
	var got backupJSON
	js := mustCLI(t, "backup", "--json", src, dest)
	if err := json.Unmarshal([]byte(js), &got); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	if got.Dest != dest || got.Bytes != int64(len(readBytes(t, dest))) || got.Sessions != 2 {
		t.Errorf("backup --json: %s", js)
	}
	mustCLI(t, "verify", dest)

	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"backup", src, dir}, "is a directory: DEST is the file to write\nHint: name the file, e.g. " + filepath.Join(dir, "strata.db") + "\n"},
		{[]string{"backup", src, dir + "/"}, "is a directory"},
		{[]string{"backup", src, filepath.Join(dir, "absent") + "/"}, "names a directory"},
		{[]string{"backup", "--json", src, "-"}, "--json has no place with DEST -"},
	} {
		r := cli(t, "", tc.args...)
		wantCode(t, r, exitUsage, tc.args...)
		if !strings.Contains(r.stderr, tc.says) {
			t.Errorf("%v: stderr %q lacks %q", tc.args, r.stderr, tc.says)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the refused backups left files: %v", ents)
	}

	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	var stderr bytes.Buffer
	if code := run([]string{"backup", src, "-"}, strings.NewReader(""), null, &stderr); code != exitOK {
		t.Errorf("backup to %s: exit %d, %s", os.DevNull, code, stderr.String())
	}
}
