package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/strata-go/strata/store"
)

// One conversation of more events than one Append takes
// (store.MaxAppendEvents) is stored whole, in batches of importBatch, its
// seqs gapless; the same file with a bad last line stores nothing, since
// the whole file is decoded before the first batch is appended.
func TestImport_ConversationOverOneAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("imports 100,001 messages")
	}
	n := store.MaxAppendEvents + 1
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"role":"user","content":"m%d"}`+"\n", i)
	}
	file := writeFile(t, "big.jsonl", b.String())
	out := mustCLI(t, "import", "--format", "openai", "--every-tokens", "0", "--db", tempDB(t), file)
	if want := fmt.Sprintf(" events=%d seq=1..%d", n, n); !strings.Contains(out, want) {
		t.Errorf("import of %d messages: %q lacks %q", n, out, want)
	}

	bad := writeFile(t, "bad.jsonl", b.String()+"{not json\n")
	db := tempDB(t)
	r := cli(t, "", "import", "--format", "openai", "--every-tokens", "0", "--db", db, bad)
	wantCode(t, r, exitError, "import of a file with a bad last line")
	if want := fmt.Sprintf("bad.jsonl:%d:", n+1); !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q does not name %s", r.stderr, want)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("the database of a failed import: %v, want it removed with nothing stored", err)
	}
}

// One conversation object over the 1 MiB from which it is read member by
// member (transcript.Decoder), from a file and from stdin: its messages
// are stored whole, in order, and a second import of the same object adds
// nothing, its records known by the refs of the first.
func TestImport_LargeConversationObject(t *testing.T) {
	if testing.Short() {
		t.Skip("imports 40,000 messages twice")
	}
	const n = 40_000
	var b strings.Builder
	b.WriteString(`{"messages":[` + "\n")
	for i := range n {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"role":"user","content":"m%d"}`, i)
	}
	b.WriteString("\n" + `],"id":"big"}` + "\n")
	if b.Len() < 1<<20 {
		t.Fatalf("the object is %d bytes, want over 1 MiB", b.Len())
	}
	file := writeFile(t, "conv.json", b.String())
	for _, name := range []string{file, "-"} { // what the decoder reads again
		open, _, err := input(name, strings.NewReader(b.String()), nil)
		if err != nil {
			t.Fatal(err)
		}
		in, err := open()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := in.(io.ReaderAt); !ok {
			t.Errorf("the input %s is a %T, no io.ReaderAt: its object would be read whole", name, in)
		}
		in.Close()
	}
	db := tempDB(t)
	out := mustCLI(t, "import", "--format", "openai", "--every-tokens", "0", "--db", db, file)
	if want := fmt.Sprintf("session=big events=%d seq=1..%d", n, n); !strings.Contains(out, want) {
		t.Errorf("import: %q lacks %q", out, want)
	}
	r := cli(t, b.String(), "import", "--format", "openai", "--every-tokens", "0", "--db", db, "-")
	wantCode(t, r, exitOK, "import of the same object from stdin")
	if want := fmt.Sprintf("session=big events=0 known=%d", n); !strings.Contains(r.stdout, want) {
		t.Errorf("import again: %q lacks %q", r.stdout, want)
	}
	last := mustCLI(t, "dump", "--raw", "--session", "big", "--from", fmt.Sprint(n), db)
	if !strings.Contains(last, fmt.Sprintf(`"text":"m%d"`, n-1)) {
		t.Errorf("the last event: %q, want message m%d", last, n-1)
	}
}
