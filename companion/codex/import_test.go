package codex_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/companion/codex"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/store/storetest"
)

// rollouts are the real rollouts — recorded from Codex 0.171.0 and the
// public ones of ../shared/data/transcripts/codex — and the importer's
// fixture.
func rollouts(t *testing.T) []string {
	a, _ := filepath.Glob(filepath.Join(realclientDir, "codex-*-rollout-*.jsonl"))
	b, _ := filepath.Glob(filepath.Join("..", "..", "..", "shared", "data", "transcripts", "codex", "*.jsonl"))
	if len(a)+len(b) == 0 {
		t.Skip("../shared/data/realclient and ../shared/data/transcripts/codex are absent")
	}
	return append(append(a, b...), filepath.Join("..", "..", "transcript", "testdata", "codex", "rollout.jsonl"))
}

// importFile imports the rollout at path into session of db.
func importFile(t *testing.T, db *store.DB, path string) companion.Import {
	t.Helper()
	f, err := companion.OpenTranscriptFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	im, err := companion.ImportTranscript(db, codex.Agent{}, "s", f, rolloutDir(t, path), false)
	if err != nil {
		t.Fatalf("importing %s: %v", path, err)
	}
	return im
}

// dump is what the session holds, one line an event.
func dump(t *testing.T, db *store.DB) string {
	var b strings.Builder
	for _, e := range storetest.Events(t, db, "s") {
		fmt.Fprintf(&b, "%d %s id=%q name=%q key=%q failed=%v ref=%q %q\n", e.Seq, e.Kind, e.ID, e.Name, e.Key, e.Failed, e.Ref, e.Text)
	}
	return b.String()
}

// Every rollout imported as it grew — cut at a quarter, in the middle of
// a line at half, at three quarters, whole, and whole again — stores what
// one import of the whole file stores, nothing twice. The cursor is what
// the store holds: where the rollout's items carry ids (Codex 0.171.0),
// a later import reads from the line after the item the session holds
// last.
func TestImport_GrownRollouts(t *testing.T) {
	incremental := 0
	for _, name := range rollouts(t) {
		t.Run(filepath.Base(name), func(t *testing.T) {
			full, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			once := dbtest.Open(t, store.Options{NoSync: true})
			importFile(t, once, name)

			grown := dbtest.Open(t, store.Options{NoSync: true})
			path := filepath.Join(t.TempDir(), "rollout.jsonl")
			lineEnd := func(frac int) int {
				i := bytes.IndexByte(full[len(full)*frac/4:], '\n')
				if i < 0 {
					return len(full)
				}
				return len(full)*frac/4 + i + 1
			}
			cuts := []int{lineEnd(1), len(full)/2 + 1, lineEnd(3), len(full), len(full)}
			for i, cut := range cuts {
				writeTo(t, path, [][]byte{full[:max(cut, len(readFile(t, path)))]})
				im := importFile(t, grown, path)
				if i == len(cuts)-1 && im.Events != 0 {
					t.Errorf("the whole rollout imported again stored %d events", im.Events)
				}
				if im.From > 0 && im.Events > 0 {
					incremental++
				}
			}
			if a, b := dump(t, once), dump(t, grown); a != b {
				t.Errorf("imported as it grew:\n%s\nwant\n%s", b, a)
			}
		})
	}
	if incremental == 0 {
		t.Error("no import read from the item the session held last")
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return b
}

// IsRecord finds an item's line by its id, and not the compacted record
// whose replacement_history holds a copy of that item, id and all.
func TestAgent_IsRecord(t *testing.T) {
	lines, _ := readRecorded(t, filepath.Join(t.TempDir(), "rollout.jsonl"))
	found, copies := 0, 0
	for _, line := range lines {
		var l struct {
			Type    string `json:"type"`
			Payload struct {
				ID string `json:"id"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatal(err)
		}
		if l.Type != "response_item" || l.Payload.ID == "" {
			continue
		}
		id := l.Payload.ID
		if !(codex.Agent{}).IsRecord(line, id) || (codex.Agent{}).IsRecord(line, id+"x") {
			t.Errorf("IsRecord of the line of %s: want true for its id alone", id)
		}
		found++
		for _, other := range lines {
			if bytes.Contains(other, []byte(companion.JSONString(id))) && !bytes.Equal(other, line) {
				copies++
				if (codex.Agent{}).IsRecord(other, id) {
					t.Errorf("IsRecord(%.80s…, %s): a line holding a copy of the item is not its record", other, id)
				}
			}
		}
	}
	if found == 0 || copies == 0 {
		t.Errorf("%d items, %d copies in other lines: the rollout holds no case to check", found, copies)
	}
}

// rolloutDir is the cwd of the first session_meta line of the rollout at
// path (the test's own reading), "" when it has none: the project an
// import names files relative to, as the hook's cwd would be.
func rolloutDir(t *testing.T, path string) string {
	t.Helper()
	for _, l := range bytes.Split(readFile(t, path), []byte("\n")) {
		var r struct {
			Type    string
			Payload struct{ Cwd string }
		}
		if json.Unmarshal(l, &r) == nil && r.Type == "session_meta" {
			return r.Payload.Cwd
		}
	}
	return ""
}
