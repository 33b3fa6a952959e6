package main

import (
	"fmt"
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
