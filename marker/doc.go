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
//     claimed resolved; every invocation opened before the span and resolved
//     inside it is claimed resolved. An invocation is an id and the seq that
//     opened it: an id resolved and opened again is two invocations, one
//     resolved and one UNRESOLVED.
//  2. Negative-fact retention: every call whose result failed inside the
//     span is claimed failed, and every key whose disposition changed inside
//     the span is claimed with its final state (rejected, failed,
//     superseded, or succeeded after a failure) and the replacement the raw
//     log names, if any — not merely mentioned. The same rule covers
//     artifacts recorded in the span and constraints stated or withdrawn in
//     it; each class has its own reason code.
//  3. Depth consistency: the frame the compaction was planned against is
//     still the current frame, and the node's depth is the depth of the root
//     slot it fills.
//
// A claim that the span does not imply (a disposition, artifact or constraint
// the raw log never recorded there, an UNRESOLVED call that is not open) is
// refused too: a marker must not promise facts that are false.
//
// Claims are identities and states. Validate compares which items a summary
// claims and in what state, never the words a claim carries: the store
// commits, for a valid summary, the claims computed from the raw span
// (tier.Required.Claims) in place of the summarizer's, so that every text a
// claim line prints — a constraint's wording, a reason, a tool's name — is
// the raw log's. A summarizer that paraphrases a constraint, or one that
// lies about it, gets neither its paraphrase nor its lie served.
//
// Validate is a pure function; the store calls it inside the compaction's
// write transaction.
package marker
