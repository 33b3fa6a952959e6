package companion

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-go/strata/store"
)

// BenchmarkHook_PreCompact measures a PreCompact hook on the real
// transcript (1,881 records, 3.4 MB) whose store holds all of it but the
// last 60 records, as after an earlier compaction: "incremental" is the
// hook — the read from the line after the record stored last, the append,
// the compaction of the head — and "whole_file" its peer on the same
// store, reading the whole file and leaving out the records stored (what a
// hook without the incremental read would do at every compaction);
// "fresh" is the first hook of a session, into an empty store. Each run
// opens and closes the store, as the command does; copying the store
// into place is not timed.
func BenchmarkHook_PreCompact(b *testing.B) {
	src := realTranscript(b)
	ls := lines(b, src)
	dir := b.TempDir()
	path := filepath.Join(dir, "t.jsonl")
	grow(b, path, ls[:len(ls)-60])
	const session = "fa812bfe-b295-4cca-9c2f-fdf01028cb46"
	dbPath := filepath.Join(dir, "strata.db")
	in := Input{SessionID: session, TranscriptPath: path, HookEventName: "PreCompact", Trigger: "auto"}
	withStore(b, dbPath, func(h *Hook) {
		if _, err := h.Run(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	})
	base, err := os.ReadFile(dbPath)
	if err != nil {
		b.Fatal(err)
	}
	grow(b, path, ls[len(ls)-60:])

	for _, c := range []struct {
		name  string
		store []byte // the store's bytes before each run; nil for none
		whole bool
	}{{"incremental", base, false}, {"whole_file", base, true}, {"fresh", nil, true}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var read int64
			for b.Loop() {
				b.StopTimer()
				os.Remove(dbPath)
				if c.store != nil {
					if err := os.WriteFile(dbPath, c.store, 0o600); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				withStore(b, dbPath, func(h *Hook) {
					t, err := OpenTranscriptFile(path)
					if err != nil {
						b.Fatal(err)
					}
					defer t.Close()
					im, _, err := importTranscript(h.db, testAgent{}, session, t, "", c.whole)
					if err != nil || im.Events == 0 {
						b.Fatalf("import: %+v, %v", im, err)
					}
					read += im.To - im.From
					if _, err := h.comp.CompactTo(context.Background(), session, im.Last); err != nil {
						b.Fatal(err)
					}
				})
			}
			b.ReportMetric(float64(read)/float64(b.N), "bytes_read/op")
		})
	}
}

// withStore opens the store at path (created if missing), runs fn with a
// Hook over it and closes it.
func withStore(b *testing.B, path string, fn func(*Hook)) {
	b.Helper()
	db, err := store.Open(path, store.Options{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	h, err := New(db, testAgent{}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	fn(h)
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
}
