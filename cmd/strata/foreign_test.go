package main

import (
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A file that is not a strata database: every command that opens it says
// what it is, when its first bytes tell.
func TestForeignFile_Hints(t *testing.T) {
	t.Parallel()
	sqlite := writeFile(t, "app.db", "SQLite format 3\x00"+strings.Repeat("\x00", 100))
	jsonl := writeFile(t, "events.jsonl", `{"session":"s","kind":"user","text":"hi"}`+"\n")
	text := writeFile(t, "notes.txt", "just some notes\nabout things\n")
	gz := writeFile(t, "x.gz", "\x1f\x8b\x08\x00rest")
	zip := writeFile(t, "x.zip", "PK\x03\x04rest")
	binary := writeFile(t, "x.bin", "\x00\x01\x02\xff\xfe")
	zeros := writeFile(t, "zeros.db", strings.Repeat("\x00", 8192)+"rest")
	foreignBolt := tempDB(t)
	b, err := bolt.Open(foreignBolt, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("theirs")); return err }); err != nil {
		t.Fatal(err)
	}
	b.Close()

	for _, tc := range []struct {
		args []string
		hint string // "": no hint of ours
	}{
		{[]string{"dump", sqlite}, "Hint: " + sqlite + " is a SQLite database\n"},
		{[]string{"stats", sqlite}, "is a SQLite database"},
		{[]string{"sessions", gz}, "is gzip-compressed data"},
		{[]string{"resume", zip, "--session", "s"}, "is a zip archive"},
		{[]string{"backup", text, tempDB(t)}, "is text\n"},
		{[]string{"verify", sqlite}, "is a SQLite database"},
		{[]string{"dump", jsonl}, "holds JSON text, not a database: to store the events it holds, run: strata replay DB " + jsonl},
		{[]string{"replay", jsonl, jsonl}, "replay's first argument is the database"},
		{[]string{"dump", foreignBolt}, "Hint: it was not written by strata\n"},
		{[]string{"dump", binary}, ""},
		{[]string{"sessions", zeros}, "Hint: " + zeros + " is zero bytes where a database's first page belongs (damaged, or never written): restore a backup, or remove it to start a new one\n"},
	} {
		r := cli(t, "", tc.args...)
		wantCode(t, r, exitError, tc.args...)
		if !strings.Contains(r.stderr, "not a strata database") {
			t.Errorf("%v: stderr %q", tc.args, r.stderr)
		}
		if tc.hint == "" && strings.Contains(r.stderr, "Hint:") || !strings.Contains(r.stderr, tc.hint) {
			t.Errorf("%v: stderr %q, want %q", tc.args, r.stderr, tc.hint)
		}
	}
	for path, want := range map[string]string{sqlite: kindSQLite, jsonl: kindJSON, text: kindText, gz: kindGzip, zip: kindZip,
		binary: "", zeros: kindZeros, foreignBolt: kindBolt, writeFile(t, "bom.json", "\xef\xbb\xbf  [1]"): kindJSON, t.TempDir(): ""} {
		if got := sniff(path); got != want {
			t.Errorf("sniff(%s) = %q, want %q", path, got, want)
		}
	}
}
