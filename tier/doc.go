// Package tier holds strata's vocabulary: raw events (L0), their kinds, the
// ledger that the raw log implies, summary nodes at any depth ≥ 1 and the
// claims they make.
//
// The package is pure: it does no I/O and needs no database. The store keeps
// the ledger incrementally by applying each appended event to the entries it
// touches; Verify replays the whole raw log through the same state machine and
// compares.
//
// # The ledger
//
// The ledger is the state the raw log implies at a seq, derived mechanically
// and never by a model: open resources (tool calls, file handles, processes),
// dispositions (key → rejected/failed/superseded, with reason, seq and the
// superseding key), active constraints (until withdrawn) and artifacts. An
// event the ledger cannot accept — a result for a call that is not open, an id
// opened twice while open, a withdrawal of a constraint that is not active — is
// bad input: Apply returns an *EventError and changes nothing.
//
// # Required claims
//
// A summary node covering a raw span S must carry the state that S implies at
// its boundary: see Required. The marker package checks a node's Claims
// against it.
//
// # Caveats
//
// Event.Failed is the negation of the JSONL "ok" field, so that the zero value
// of a tool_result is a success, as in the JSONL where "ok" defaults to true.
package tier
