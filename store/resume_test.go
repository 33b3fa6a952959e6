package store_test

import (
	stderrors "errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestResume_MarkerUnderAnotherID: a marker's record stored under another
// id — a damaged key that the backend's check passes — is damage: Verify
// reports the id the record holds, and a resume of the id the key says is
// ErrCorrupt, never the other marker's frame.
func TestResume_MarkerUnderAnotherID(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.OpenUnverified(t, store.Options{NoSync: true})
	mustAppend(t, db, "s",
		tier.Event{Kind: tier.KindUser, Text: "go"},
		tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "no"},
		tier.Event{Kind: tier.KindUser, Text: "again"})
	p, err := db.PlanSpan("s", 3, 1000)
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Commit(p, store.Summary{Narrative: "x rejected", Claims: p.Required.Claims(), Summarizer: "test"})
	if err != nil {
		t.Fatal(err)
	}
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	id := res.Marker
	forge(t, path, "s", "markers", seqKey(id+8), valueOf(t, path, "s", "markers", seqKey(id)))
	damage(t, path, "s", "markers", seqKey(id), func([]byte) []byte { return nil })
	ro, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rep, err := ro.Verify(store.VerifyOptions{})
	if err != nil || !strings.Contains(fmt.Sprint(rep.Problems), fmt.Sprintf("record holds marker %d", id)) {
		t.Errorf("Verify: %v %v, want the marker under another id", rep.Problems, err)
	}
	if _, err := ro.Resume("s", id+8); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("Resume(%d): %v, want ErrCorrupt", id+8, err)
	}
}

// TestResume_MissingNamedRecordIsDamage: a record that a root, a marker or
// a checkpoint names, gone from the file, is damage at the record that
// names it — a CorruptError, never "not found" as if the caller had asked
// for something that does not exist.
func TestResume_MissingNamedRecordIsDamage(t *testing.T) {
	dbtest.FileOnly(t)
	cases := []struct {
		name, place string
		key         func(res store.CommitResult) []byte
		compact     bool
		names       string // the CorruptError's bucket
	}{
		{"the last root's marker", "markers", func(res store.CommitResult) []byte { return seqKey(res.Marker) }, true, "roots"},
		{"the marker's node", "nodes", func(res store.CommitResult) []byte { return seqKey(res.Node.ID) }, true, "markers"},
		{"the indexed checkpoint", "ckpts", func(store.CommitResult) []byte { return seqKey(1) }, false, "ckvalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := dbtest.OpenUnverified(t, store.Options{NoSync: true})
			mustAppend(t, db, "s", prefix...)
			var res store.CommitResult
			if tc.compact {
				p, err := db.PlanSpan("s", 3, 1000)
				if err != nil {
					t.Fatal(err)
				}
				if res, err = db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "test"}); err != nil {
					t.Fatal(err)
				}
			}
			path := db.Path()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			damage(t, path, "s", tc.place, tc.key(res), func([]byte) []byte { return nil })
			ro, err := store.Open(path, store.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			_, err = ro.Resume("s", store.Latest)
			var ce *store.CorruptError
			if !errors.As(err, &ce) || ce.Session != "s" || ce.Bucket != tc.names || !strings.Contains(err.Error(), tc.name+" is missing") {
				t.Errorf("Resume with %s missing = %v, want a CorruptError in %s saying %s is missing", tc.name, err, tc.names, tc.name)
			}
			if errors.Is(err, store.ErrNotFound) || stderrors.Is(err, store.ErrNotFound) {
				t.Errorf("Resume with %s missing = %v: ErrNotFound, as if the caller had asked for what is not there", tc.name, err)
			}
		})
	}
}

// TestResume_Bytes runs testdata/protocol/resume: the resumed context's
// bytes from nothing, from the newest marker and an older one, for an
// unknown session or marker, and after a refusal.
func TestResume_Bytes(t *testing.T) { runProtocol(t, "resume") }
