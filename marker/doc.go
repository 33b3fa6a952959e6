// Package marker holds recovery markers and the three conditions a marker
// must meet before it is committed.
//
// A marker is a pointer to a summary node plus a promise: the node holds
// every fact needed to go on without re-reading the raw log up to the
// marker's boundary. Validate checks the promise against the ledger computed
// from the raw span — at compaction time, while the raw log is still in the
// database. Checking at emission rather than at resume is what lets resume be
// wholesale: a resuming agent trusts a valid marker entirely or falls back
// entirely to a raw checkpoint, and never patches a summary.
//
// # The three conditions
//
//  1. Closure: every call, handle or process open at the boundary is claimed
//     UNRESOLVED, as what it is (a call or a resource); nothing open is
//     claimed resolved; every id opened before the span and resolved inside
//     it is claimed resolved.
//  2. Negative-fact retention: every key whose disposition changed inside
//     the span is claimed with its final state (rejected, failed,
//     superseded) and the replacement the raw log names, if any — not
//     merely mentioned. The same rule covers artifacts
//     recorded in the span and constraints stated or withdrawn in it; each
//     class has its own reason code.
//  3. Depth consistency: the frame the compaction was planned against is
//     still the current frame, and the node's depth is the depth of the root
//     slot it fills.
//
// A claim that the span does not imply (a disposition, artifact or constraint
// the raw log never recorded there, an UNRESOLVED call that is not open) is
// refused too: a marker must not promise facts that are false.
//
// Validate is a pure function; the store calls it inside the compaction's
// write transaction.
package marker
