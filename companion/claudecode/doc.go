// Package claudecode is Claude Code's adapter (Agent) to package
// companion, which runs strata beside it as the command hooks Claude Code
// runs around its own compaction (`strata claude-code hook`): PreCompact
// (companion.ActionCompact), while the raw transcript is still whole,
// SessionStart with source "compact" (companion.ActionInject), right
// after Claude Code replaced the session's context by its own summary,
// and PostCompact (companion.ActionCheck), whose input carries that
// summary (compact_summary). Claude Code 2.1 runs them in that order and
// only then appends its compact_boundary record and the summary record
// (the user record it flags isCompactSummary) to the transcript: the
// summary is checked at PostCompact from its input, or at the first hook
// that reads the records when PostCompact did not run. The injected state
// is SessionStart's {"hookSpecificOutput":{"hookEventName":"SessionStart",
// "additionalContext":…}}.
//
// The transcript is Claude Code's JSONL (transcript.ClaudeCode), every
// record keyed by its uuid, which the incremental import searches for.
// The boundary is the last event before the compact_boundary record's
// (transcript.IsClaudeCodeCompaction), less the messages Claude Code
// keeps verbatim after its summary (the record's preservedSegment,
// Agent.Preserved). The hooks are installed in .claude/settings.json of
// the project or of the user (Agent.Settings), and Claude Code also runs
// those of a project's .claude/settings.local.json.
//
// # Caveats
//
//   - The hook acts on what the transcript file holds when it runs:
//     Claude Code writes its records asynchronously, and the last few may
//     reach the file after PreCompact ran. SessionStart imports them and,
//     when they fall before the compact_boundary record, compacts up to it
//     again, so the state injected is the state at the boundary. When the
//     compact_boundary record itself is not in the file yet, the boundary
//     is the head PreCompact compacted (companion.Result.Unwritten), and Claude
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
//     raw event after the boundary, companion.State.Bytes long) until the next hook stores more (the resumed context
//     holds the raw events after the marker) or a fold invalidates the
//     marker (four compactions later); its node's claims stay.
package claudecode
