// Package codex is OpenAI Codex CLI's adapter (Agent) to package
// companion, which runs strata beside Codex as the command hooks Codex
// runs around its own compaction (`strata codex hook`): PreCompact
// (companion.ActionCompact), while the rollout still holds every item
// before the cut; PostCompact (companion.ActionCheck), after Codex wrote
// its compacted record; and SessionStart with source "compact"
// (companion.ActionInject), which Codex 0.171 runs just before the first
// model request after the compaction. Codex writes the compacted record
// — its summary (message) and the history it keeps (replacement_history)
// — before it runs PostCompact: the summary is checked there, from the
// rollout. The injected state is SessionStart's
// {"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":…}},
// which Codex hands the model as a developer message marked as a hook's
// output; read back from the rollout, that message is never the user's
// words (transcript.Codex skips it).
//
// The rollout is read by transcript.Codex, every item keyed by its id
// (msg_…, fc_…), which the incremental import searches for (IsRecord);
// a read from the middle of the rollout begins in the directory the
// session_meta or turn_context lines before it name (Dir), so that it
// names the files a patch wrote as a whole read does. The boundary is the
// last event before the compacted record's (transcript.IsCodexCompaction);
// its summary is the rest of that record's events. Codex keeps no
// item verbatim after its summary but copies of the user's messages
// before the cut (Preserved is "").
//
// The hooks are installed in .codex/hooks.json of the project, which
// Codex reads when the project is trusted, or of the user
// ($CODEX_HOME/hooks.json, ~/.codex/hooks.json without CODEX_HOME): a
// JSON object {"hooks": {EVENT: [{"matcher": …, "hooks": [{"type":
// "command", "command": …, "timeout": 30}]}]}} of the shape of Claude
// Code's, which Codex refuses whole when it holds any other top-level
// member than "hooks" and "description". Codex runs a hook from such a
// file only once the user trusted it (Codex's hooks review, which stores
// the hook's hash in the user's config.toml as hooks.state."KEY".
// trusted_hash), or with `--dangerously-bypass-hook-trust`; strata
// installs the hooks and leaves the trust to the user. Codex sets no
// variable naming the project for its hooks: a hook runs in the
// session's directory, its input's cwd.
//
// # Caveats
//
//   - An item whose id the rollout holds twice, the later copy after the
//     item the session stored last, makes the read start after that copy:
//     items between the two would be missed. Codex 0.171 writes each item
//     once; a resumed thread appends to the same rollout.
//   - A read from the middle of the rollout takes the directory the lines
//     before it name for the whole read: a turn_context naming another
//     directory later in the read does not change it.
package codex
