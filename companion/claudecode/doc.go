// Package claudecode runs strata beside Claude Code, as the command hooks
// Claude Code runs around its own compaction (`strata claude-code hook`):
// PreCompact, while the raw transcript is still whole, SessionStart with
// source "compact", right after Claude Code replaced the session's context
// by its own summary, and PostCompact, whose input carries that summary.
// Claude Code 2.1 runs them in that order and only then appends its
// compact_boundary record and the summary record to the transcript. A
// Hook reads each event's input (Input: the JSON on the hook's stdin) and
// does its part against a store:
//
//   - PreCompact imports the session's transcript into the session its
//     session_id names and compacts the session's head into one L1 node
//     with the extractive summarizer, valid by construction: a marker
//     stands where Claude Code is about to cut — unless the session's
//     last event is the hook's own check of the summary: no record has
//     reached the transcript since SessionStart read it, and nothing is
//     compacted, so that running the hooks again changes nothing.
//   - SessionStart(compact) imports what Claude Code wrote since — its
//     compact_boundary record and the summary it flags isCompactSummary,
//     kept as the event of its own record (a system event, never a
//     strata summary) — makes sure a marker stands at the boundary (the
//     last event before the compact_boundary record: PreCompact's, or one
//     it makes when PreCompact did not run or records before the boundary
//     were written after it ran), and returns as its output the hook JSON
//     {"hookSpecificOutput":{"hookEventName":"SessionStart",
//     "additionalContext":…}}: the State the raw log implies at the
//     boundary, rendered within a token budget (State.Render). It also
//     compares Claude Code's summary with that state (Check) and stores
//     the comparison, once, as a system event after what it imported.
//     With no compact_boundary record and no compaction before it, there
//     is no boundary (Result.NoBoundary): what it read stays stored, and
//     nothing is injected.
//   - PostCompact checks Claude Code's summary, its compact_summary,
//     against the state at the head PreCompact compacted, and stores the
//     check once (ParseCheck reads it back). When the records are in the
//     transcript already, the summary record is checked instead; when
//     PostCompact does not run, the first hook that reads the records
//     checks it. A summary is checked at the last event it stands for:
//     before the messages Claude Code keeps verbatim after it (the
//     compact_boundary record's preservedSegment), which the context holds
//     as they are.
//
// Every other event and source is left alone.
//
// # The incremental read
//
// Every event the store holds carries the ref of the record it came from:
// a Claude Code record's uuid (tier.Event.Ref). An import finds the last
// event made from a record of the transcript, searches the file backwards
// from its end for that uuid (as a JSON string), parses the line it is on
// to be sure it is that record's, and decodes from the next line, the
// calls open at the session's head passed on (transcript.Target.Open), so
// that a result in the new part resolves the call the stored part opened.
// A 20 MB transcript grown by a few hundred records is read from where it
// grew, not whole. When the record is not found — the file was rewritten —
// or the session holds none, the whole file is read, and the records the
// session holds are left out by their refs (transcript.Target.Stored):
// either way importing again adds nothing twice. The read stops at the end
// of the last whole line: a line Claude Code is still writing is read by
// the next hook. No cursor is kept beside the store: the store's refs are
// the cursor, and they cannot disagree with what it holds.
//
// SessionStart reads Claude Code's compaction from the store too, not
// from the file: the import stored the compact_boundary record as a
// system event (transcript.IsClaudeCodeCompaction) and the summary after
// it, so the hook walks the session's events back from the head, down to
// the head PreCompact compacted, for the newest one.
//
// # Caveats
//
//   - The hook acts on what the transcript file holds when it runs:
//     Claude Code writes its records asynchronously, and the last few may
//     reach the file after PreCompact ran. SessionStart imports them and,
//     when they fall before the compact_boundary record, compacts up to it
//     again, so the state injected is the state at the boundary. When the
//     compact_boundary record itself is not in the file yet, the boundary
//     is the head PreCompact compacted (Result.Unwritten), and Claude
//     Code's summary is checked by PostCompact or a later hook. A check
//     made at PostCompact counts the facts of the messages Claude Code
//     keeps verbatim too: their records are not written yet.
//   - The store keeps the summary's events, not its isCompactSummary
//     flag: the summary is the record of the event right after the
//     compact_boundary record's, when that is a system event, as Claude
//     Code writes it. A summary without text stores no event: nothing is
//     checked.
//   - A record whose uuid the file holds twice — Claude Code writing the
//     record the session stored last once more, later — makes the read
//     start after the later copy: records written between the two would be
//     missed. The real transcripts hold no uuid twice.
//   - Should Claude Code compact twice with no record between, PreCompact
//     compacts nothing (its head is the hook's own check) and
//     SessionStart makes the marker at the new boundary — when its
//     compact_boundary record is written by then; else it injects the
//     state at the previous one.
//   - The marker named in the injected state resumes to the bytes whose
//     sha256 it gives (the whole context: the summary nodes and every
//     raw event after the boundary, State.Bytes long) until the next hook stores more (the resumed context
//     holds the raw events after the marker) or a fold invalidates the
//     marker (four compactions later); its node's claims stay.
package claudecode
