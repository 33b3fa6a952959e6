// Package boltfile is strata's backend of one bbolt file: the places of
// package backend — a session's state, its events by seq, its records by
// table and key — laid out in bbolt's buckets (tx.go), every value in an
// envelope whose CRC covers its identity as well as its bytes
// (envelope.go).
//
// It answers for the file's integrity below the store's records:
//
//   - a damaged file gives errors, never a hang or a crash. A panic or a
//     memory fault inside bbolt becomes backend.ErrCorrupt (guard.go);
//     and before bbolt reads pages for an operation, the pages that
//     operation can reach are walked from bbolt's map and checked, so that
//     a branch page pointing at an ancestor cannot make a cursor recurse or
//     loop forever (pages.go). Only what an operation reads is walked: the
//     first read of a long session does not read all of it.
//   - a value returned is the one stored at that place — session, table,
//     key — or a *backend.CorruptError naming the place.
//   - a new database appears at its path complete, or not at all
//     (create.go).
//   - a commit that fails at the disk's fsync poisons the handle; one that
//     finds the disk full does not (Backend.Update).
//
// # Layout
//
// Format 7 (FormatVersion), one bbolt file:
//
//	meta/
//	  version             → the meta record: format, created by, created
//	s/<id>/               → one bucket per session:
//	  art, audit, ckpts,  → the tables (backend.Table's String), buckets
//	  ckvalid, constr,      of records by key
//	  disp, markers,
//	  nodes, roots
//	  0xFE <seq>          → event seq (big-endian u64)
//	  0xFF                → the state
//	  0xFF "open"/        → the Open table
//
// The events sort after the tables' names and before the state and the
// open calls: an append writes one leaf of the session's bucket.
//
// Every value is its payload, then a 5-byte trailer: the CRC32C of the
// record's identity (session id, table, key, each length-prefixed where it
// varies) and the payload, big-endian, then the envelope version, 1.
//
// # Checks
//
// Backend.Check checks the file's own structure for the store's Verify:
// bbolt's meta pages and freelist, every page, every envelope, then bbolt's
// own consistency check.
package boltfile
