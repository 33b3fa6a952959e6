// Package transcript converts the transcripts agents leave behind — OpenAI
// chat messages, Anthropic Messages, Claude Code session files, Codex
// rollouts, Gemini CLI chats, and the
// exports and agent trajectories built of them — into raw events
// (tier.Event, the event format of docs/events.md) that the store accepts
// as they are, a session per conversation.
//
// A transcript holds one conversation or several, each named by its own id
// (a Claude Code record's sessionId; a Codex rollout's session_meta id; a
// Gemini CLI chat's sessionId; a conversation object's id,
// conversation_id, session_id or uuid), else after the file: "<file>", or
// "<file>-<n>" for the n-th of a file that holds a list of conversations (a
// JSON array of them, JSONL of them). Options.Target says
// which session each conversation goes to, with the calls open there and
// the records it holds already (see Decoder).
//
// Every event carries the ref (tier.Event.Ref) of the record it was made
// from: a Claude Code record's uuid, else the record's position in its
// conversation and a hash of the conversation's name and the record's
// bytes. A transcript read again, or grown at its end, gives the same refs
// for the same records: the store refuses a ref a session holds, and
// Target.Stored leaves out the records a session holds, so that importing
// again adds only what is new.
//
// The mapping:
//
//	user / assistant / system text       → user / assistant / system events
//	OpenAI tool_calls, Anthropic tool_use → tool_call (id, name, text = arguments)
//	OpenAI role "tool", tool_result       → tool_result resolving the call; ok:false on
//	                                       is_error (Anthropic server tools: a
//	                                       *_tool_result_error content)
//	Responses API mcp_call                → tool_call and its tool_result; ok:false on an error
//	                                       or status "failed"
//	a refused tool use: a failed result   → tool_result ok:false, then rejected with key
//	(is_error) with Claude Code's           "tool/<name>:<file or command>" and the user's reason
//	toolUseResult "User rejected tool
//	use", or the harness's rejection text
//	a successful Write, Edit, MultiEdit,  → artifact, key = the file (relative to the
//	NotebookEdit, str_replace_based_edit_   working directory when under it)
//	tool create/str_replace/insert,
//	write_file, apply_patch …
//	Claude Code compact_boundary          → a system event; the compact summary → system
//	Codex compacted                       → a system event (CodexCompacted), its message → system
//	Codex exec/patch end events           → ok:false on a non-zero exit_code or a patch not applied;
//	                                       the files a patch event changed → artifact
//	Codex developer messages, hook output → nothing (skipped: strata's own injection is not the
//	                                       user's words)
//	Gemini CLI toolCalls                  → tool_call and tool_result, ok:false on a status other
//	                                       than success, a response's error, or the shell tool's
//	                                       Exit Code field ≠ 0 or Signal field
//	Gemini CLI compression ($set history) → a system event (GeminiCompressed), the summary → system
//	Gemini CLI <hook_context> parts       → nothing (skipped: a hook's context, strata's among it)
//	an agent's step (action, observation) → assistant text, tool_call "step-N" named after the
//	                                       action's first word, and its tool_result
//	timestamps                            → time
//
// Every event a Decoder returns passes Event.Check, and the events of a
// session, appended in order to a session whose open calls were passed as
// Target.Open, pass the ledger's rules: every tool_result resolves an open
// call, no id is opened twice while open.
//
// Facts come from structured fields only — is_error, toolUseResult, an
// mcp_call's error or status, a tool's input — never from the words of a
// result: a result that did not fail is neither a failure nor a rejection,
// whatever its text says.
//
// # Quirks
//
// Real transcripts break those rules; each break is handled one way and
// counted in the Report, never an error:
//
//   - A call id opened again while still open (a re-logged record, a model
//     reusing an id): the new call is renamed "id#2" ("id#3" …); results
//     for the id resolve the open calls oldest first.
//   - Calls answered later, in any order (parallel calls): each result
//     resolves its own call whenever it comes.
//   - A result for no open call: kept as a system event naming the id (a
//     rejection in it still gives a rejected event, keyed "tool/unknown:id").
//   - Claude Code records seen twice (the same uuid), sidechain records of
//     a main session, unknown record types, roles and blocks: skipped.
//   - Ids with control characters or over the size limit, texts over it,
//     bad timestamps: repaired, clipped or dropped.
//   - Bytes that are not UTF-8, and escaped lone surrogates ("\ud800"):
//     read as U+FFFD, as encoding/json reads them, and counted
//     (Report.InvalidUTF8).
//
// Invalid JSON is an error, a *LineError naming the file and line; so is
// an input in which no record is of a kind the format knows (an error
// wrapping ErrNothingRecognized, naming the file and what it holds).
//
// # Caveats
//
// OpenAI messages carry no failure flag: a tool message (or a
// function_call_output item) is ok:false only when it carries a
// (non-standard) "is_error": true; an mcp_call item says so in its "error". Calls left open at the
// end of a transcript stay open in the ledger: that is what the transcript
// says. An "id#2" in a later file of the same session is found by its
// first id only when the decoder is given the open calls (Target.Open).
// A record changed in place in a file imported before gets a new ref (its
// bytes are in it, unless it has a uuid): it is imported again.
package transcript
