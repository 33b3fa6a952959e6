// Package compaction folds raw spans into summary nodes and nodes into
// higher ones, through a Summarizer, and commits a recovery marker only when
// the store has checked the summary against the raw log.
//
// A compaction has three steps. Plan (a read transaction in the store) picks
// the span and computes the required claims from the ledger. Summarize runs
// with no transaction held — a model call can take seconds, and bbolt has one
// writer. Commit (one write transaction) checks that the frame and the raw
// span are unchanged, recomputes the ledger from the raw events and validates
// the claims: a valid summary gets its node, marker and checkpoint; an
// invalid one gets none, and the store writes a checkpoint at the span's
// start and an audit record instead. A refusal is normal operation.
//
// Optionally the summarizer is asked again from the raw span, told what was
// missing (Options.Retries): repair happens here, at compaction time, from
// raw, or not at all — never at resume.
//
// # Caveats
//
// Compaction of one session should run from one goroutine: two compactors
// racing on a session get store.ErrConflict, which Run retries by planning
// again, but the summarizer's work for the losing plan is wasted.
package compaction
