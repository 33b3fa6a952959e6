// Package dump renders everything a strata database holds, from one
// read-only Snapshot, in three forms:
//
//   - JSON: one JSON document, {"format_version":…, "sessions":[…]}, with the
//     field names of `strata dump --json`;
//   - Text: a readable tree, each root with the nodes it covers indented
//     below it (`strata dump`);
//   - Dot: a Graphviz picture of each session's tiers, roots, markers and
//     checkpoints (`strata dump --dot`).
//
// The renderers stream: records are read one at a time and written as they
// come, so a dump of a database larger than memory holds one record (Text
// holds a session's nodes, to draw its tree; Dot holds its nodes, markers
// and checkpoints). They run inside the caller's transaction, so that a
// command-line tool and an HTTP handler (package debughttp) give the same
// bytes for the same snapshot:
//
//	err := db.View(func(s *store.Snapshot) error {
//		return dump.JSON(os.Stdout, s, dump.Options{Raw: true})
//	})
//
// # Caveats
//
// Output is buffered and flushed before a renderer returns, also when it
// fails: after an error the output written so far is incomplete (a JSON
// document without its end). An unknown Options.Session fails before any
// byte is written. The snapshot's read transaction stays open for as long
// as the writer takes: a slow reader of a large dump keeps bbolt from
// reusing the pages freed meanwhile, so the file may grow.
package dump
