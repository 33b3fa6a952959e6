// Package store is strata's protocol over its bytes: per session, the raw
// log (L0), summary nodes (L1, L2, …), the roots and frame, recovery
// markers, raw checkpoints, the audit of refused compactions and the ledger
// at head, kept in a backend (package backend) — by Open, one bbolt file
// (package boltfile) or PostgreSQL (package postgres), whichever the path
// names, from package backend's registry. store imports no backend: a
// program links in those it opens.
//
// Each step of the protocol has its file: append.go (the ledger's checks
// and the events' write), group.go (the group commit every write goes
// through), plan.go (a compaction's span and what it must claim),
// commit.go (validation and the node's write), invalidate.go and
// refuse.go, resume.go (a marker or the fallback), verify.go (every
// logical invariant), backup.go; session.go holds the records' encoding
// over the backend's places (records.go, codec.go).
//
// The main path for an agent, with the backends linked in (Open):
//
//	import _ "github.com/strata-go/strata"
//
//	db, err := store.Open("agent.db", store.Options{Create: true})
//	res, err := db.Append("session-1", tier.Event{Kind: tier.KindUser, Text: "..."})
//	rc, err := db.Resume("session-1", store.Latest)
//	model.Send(rc.Text())
//
// with compaction.Compactor running the compactions (it calls PlanSpan,
// PlanFold or PlanRecompact, a Summarizer with no transaction held, then
// Commit).
//
// # Guarantees
//
//   - Append is atomic per call and durable when it returns (unless
//     Options.NoSync); seqs are gapless; bad input (an *tier.EventError) stores
//     nothing of the call. Concurrent appends share one transaction and one
//     fsync (group commit).
//   - Commit writes a node and its marker only when marker.Validate passes
//     against the ledger recomputed from the raw span inside the write
//     transaction; a frame change invalidates, in the same transaction, every
//     marker and checkpoint it made stale.
//   - Resume reads only stored bytes: the same database renders the same
//     context, after a reopen and from a backup.
//   - Every stored value is checked by the backend (boltfile: a CRC32C over
//     the record's place and bytes) and its msgpack structure by the store
//     before msgpack decodes it; damage is reported as a *CorruptError,
//     never returned as data.
//
// # Caveats
//
//   - bbolt allows one writing process: a second Open of a live database —
//     reader or writer — waits Options.LockTimeout and fails with ErrLocked.
//   - bbolt checksums only its meta pages and can panic or fault on a damaged
//     file. strata recovers panics and turns memory faults into panics
//     (debug.SetPanicOnFault) where it reads, but a fault in another
//     goroutine of bbolt's cannot be caught: run deep checks of untrusted
//     files in a child process (the CLI's verify does).
//   - A zero-length file is refused, not treated as a fresh database.
//   - A damaged page graph (a branch page pointing back at an ancestor)
//     would make bbolt's cursors loop forever: boltfile walks the pages a
//     read can reach before bbolt does, and reports such damage as an
//     error.
package store
