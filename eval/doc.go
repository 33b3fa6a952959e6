// Package eval measures strata's promise on recorded sessions: what a
// summary committed without validation loses, what validation costs, and
// what repairing a refused summary from raw at compaction time gives back.
//
// Run replays each session event by event into temporary databases,
// compacting under a policy with a compaction.Probabilistic summarizer — a
// stand-in for a model that forgets: each required fact dropped with a
// probability that is higher for negatives and artifacts (Bias), grows with
// the facts the span requires (PressureFacts) and, on a retry, sticks to
// the facts dropped before (Stickiness), all reproducible from a seed —
// through three arms:
//
//   - naive — as every compaction scheme in the field works today: each
//     summary is committed and trusted without validation
//     (store.DB.CommitUnchecked, no retries);
//   - strata-refuse — as built: compaction.Compactor, which commits a marker
//     only when the summary carries the required claims, re-asking the
//     summarizer from the raw span up to Retries times; a summary still
//     refused leaves the span to resume from the raw checkpoint;
//   - strata-repair — the same with compaction.Options.Repair: after the
//     last refused retry the summarizer's narrative is committed with the
//     claims the store computed from the raw span.
//
// Options.DropRates, Stickiness and Retries make a grid: every combination
// runs every arm, side by side on the same sessions (an arm with no retry
// does not depend on the stickiness and runs once per drop rate). All arms
// see the same summarizer and seed, so they are asked for the same spans the
// same way until a refusal makes strata-refuse's spans differ (a refused L1
// span is asked for again, longer, at the next boundary).
//
// After every compaction round — each append after which the compactor
// made at least one node or refusal — Run resumes the session
// (store.Latest) and measures:
//
//   - State loss. The facts the raw log implies at head are computed
//     independently, by replaying the raw events 1..head through a
//     tier.Ledger (Truth): every open call, handle or process (with its
//     kind), every call or resource whose result failed (by invocation: its
//     id and the seq that opened it), every disposition (its state, and for
//     superseded its replacement), every active constraint and every
//     artifact. The resumed context's view
//     of the same state is read from its structured content only — the
//     nodes' claims in order, then the raw events in ctx.Events in order,
//     each entry overriding what came before for the same id or key
//     (UNRESOLVED opens a call, resolved closes it, a claimed failure or a
//     failed result adds a failure, a withdrawn constraint removes it; raw
//     events apply as the ledger applies them, leniently: a
//     result for a call the view does not hold just closes nothing).
//     Narratives are not read. A fact is lost when the ledger holds it and
//     the view lacks it or holds another state (a different disposition,
//     a call as a resource), and also when the view holds an entry the
//     ledger does not (a call still UNRESOLVED that was resolved, a
//     constraint still active that was withdrawn, an artifact or
//     disposition never recorded): the context lacks the fact that it is
//     closed, withdrawn or absent. Loss counts every such fact, per class;
//     a lossy resume is one with loss above zero.
//   - Divergence: the resume's sha256 against a second resume of the same
//     point, a resume after closing and reopening the database, and a
//     resume from a backup taken at that point. A resume counts once as
//     divergent if any of the three differs.
//   - Fallbacks: a round's resume is a fallback when its context does not
//     cover the round's compacted span with nodes — its boundary is before
//     the end of the latest span the round compacted or refused — so the
//     agent resumes from raw events where a summary was due: the content of
//     the raw checkpoint the refusal wrote at the span's start. Resumes are
//     only measured after compaction rounds, where a marker was expected.
//     store.Resume(Latest) labels such a context "marker" when an earlier
//     root's marker is still valid (it serves the same prefix roots and raw
//     tail), and "checkpoint" only when no root exists yet; FromCheckpoint
//     counts the latter label. A refused fold keeps its children, which
//     still cover the span: it is a refusal, not a fallback.
//   - Refusals per reason class: every refused attempt in the store's audit
//     counts once in each class it failed (strata arms; strata-repair's
//     repaired attempts included, so the summarizer's losses stay
//     measured); for naive, the markers committed whose node would have
//     failed validation (Unsound), per class. Arm.Refused counts the
//     compactions still refused after the retries, Arm.Repaired those
//     strata-repair committed from raw.
//   - Context size: tier.EstimateTokens of the resumed context's text
//     rendering, against that of the raw log 1..head rendered as a context
//     with no nodes (a checkpoint at seq 0).
//
// The harness and the model are checked by their own prediction: for each
// compaction an arm asks for, compaction.Probabilistic.RefusalProbability
// gives the chance that it ends refused after the retries (for
// strata-repair: repaired; for naive: unsound), from the span's required
// facts; Arm.PredictedRefused sums it (and Arm.PredictedVar the Bernoulli
// variances), to compare with the counts measured.
//
// # Caveats
//
// eval measures logic, not durability: its databases are opened with
// store.Options{NoSync: true} in a temporary directory, removed afterwards.
// A naive database fails store.Verify by design (Verify re-validates every
// root's claims); Options.Verify checks the strata databases only.
package eval
