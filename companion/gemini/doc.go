// Package gemini is Gemini CLI's adapter of package companion
// (`strata gemini hook`, docs/gemini.md): the hooks Gemini CLI runs
// around its compression of the chat, the chat it records, and where its
// hooks are installed.
//
// Gemini CLI (0.61.0) has no hook right after a compression: it runs
// PreCompress before every turn of the model — compressing or not, the
// hook runs before its threshold check, and it cannot block — and
// BeforeAgent when a prompt arrives, whose
// hookSpecificOutput.additionalContext it appends to the prompt inside
// <hook_context> tags. Its chat (~/.gemini/tmp/<project>/chats/
// session-*.jsonl, transcript.Gemini) records a compression as a "$set"
// record: the history now, the summary as a user message under a new id,
// the messages it kept verbatim under new ids too. So:
//
//   - PreCompress imports the chat (companion.ActionCheck): the whole
//     file, the records the session holds left out; when the chat
//     records a compression whose summary no hook checked, the summary is
//     checked against the state at the boundary and the check stored.
//     Nothing is compacted: most PreCompress runs precede no compression.
//   - BeforeAgent (companion.ActionInjectOnce) imports the chat and, when
//     it records a compression after the session's compacted prefix,
//     compacts the session to the boundary (the event before the
//     compression's, less the messages it kept), checks the summary, and
//     outputs the state at the boundary — once: the injection is stored
//     as a system event whose ref names the boundary, and a later
//     BeforeAgent finding it injects nothing. Without a compression it
//     injects nothing.
//
// The summary check reads the summary Gemini CLI recorded: the text of
// the compression's user message, what the model answered to its
// <state_snapshot> request.
package gemini
