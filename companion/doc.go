// Package companion runs strata beside a coding agent, as the command
// hooks the agent runs around its own compaction: it imports the agent's
// transcript into a store, compacts the session where the agent is about
// to cut (a marker checked against the raw log), checks the agent's own
// summary against the state the raw log implies there, and adds that
// state to the agent's compacted context. The flow is the same for every
// agent; what differs — the hook input's events, the transcript's
// format and ids, the agent's record of its compaction, the hook's
// output, where the hooks are installed — is an Agent, one adapter per
// agent (companion/claudecode for Claude Code).
//
// # The flow
//
// A Hook (New) runs one hook input (ReadInput) by its Action:
//
//   - ActionCompact (Claude Code's and Codex's PreCompact) imports the
//     transcript into the session its session_id names and compacts the
//     session's head into one L1 node with the extractive summarizer,
//     valid by construction: a marker stands where the agent is about to
//     cut — unless the session's last event is the hook's own (a check or
//     an injection it stored): nothing new, nothing compacted, so that
//     running the hooks again changes nothing.
//   - ActionCheck (PostCompact; Gemini CLI's PreCompress, which runs
//     before every turn of the model, compressing or not) imports the
//     transcript and checks the agent's summary — the records of it in
//     the transcript, or the summary the input carries — against the
//     state at the boundary (Check), and stores the check once as a
//     system event (ParseCheck reads it back; Sessions lists them).
//   - ActionInject (SessionStart after a compaction) imports what the
//     agent wrote since, makes sure a marker stands at the boundary,
//     checks the summary when its records are there, and returns the
//     agent's output (Agent.Output) adding the State at the boundary to
//     the context, rendered within a token budget (State.Render).
//     ActionInjectOnce does it at the first hook after a compaction only,
//     for an agent with no hook right after one (Gemini CLI's BeforeAgent).
//
// The import is incremental and idempotent, keyed by the transcript's own
// ids (ImportTranscript): every event carries the ref of its record, the
// last one the session holds is searched for from the end of the file
// (Agent.IsRecord), and the read starts after it; a record the session
// holds is never stored twice. The boundary is the last event before the
// agent's record of its compaction (Agent.IsCompaction), less the records
// it keeps verbatim after its summary (Agent.Preserved), or — before that
// record is written — the head the compaction's hook compacted.
//
// # Writing an adapter
//
// An adapter is a package with a type implementing Agent, usually an
// empty struct: Action maps the agent's hook events (and trigger or
// source) to actions; Output wraps the injected text as the agent's hook
// reads it (AdditionalContext for a hookSpecificOutput.additionalContext);
// Format names the transcript.Format its transcript is read in (a reader
// of a new format is added to package transcript, each record's events
// carrying the record's id as their ref); IsRecord tells a line of that
// record (or the adapter is a WholeReader, its transcript read whole at
// every import); IsCompaction and Preserved find the agent's compaction,
// and CompactionRecord names its record of one in the hook's log;
// Settings says where its hooks file is and the events, matchers and
// handler install writes. It is registered by one line in the CLI's list
// of agents (cmd/strata's agents), which makes `strata NAME install`,
// `uninstall`, `status` and `hook` of it with the same flags and output as
// every other agent's. companion/claudecode is the example to follow.
//
// What else a hook needs is here too and shared: the hook's log
// (AppendLog, Result.Line), the store's default place (DefaultStore,
// DefaultLog), reading a hook's command line as sh does (ShellWords), and
// keeping the store out of git (IgnoreFiles).
package companion
