// Command strata is the command line of the strata store: it replays raw
// event logs (JSONL) into a database, compacting as it goes, compacts what
// a database holds, imports agent transcripts, and lists, dumps, resumes, verifies, backs up and counts what
// a database holds, and copies sessions between databases.
//
// Usage:
//
//	strata replay DB [--window N] [--share F] [--every-tokens N] [--every N] [--every-events M]
//	              [--fold K] [--max-roots R] [--summarizer extractive|lossy|openai] [--retries R] [--repair] [--json] FILE...
//	strata replay --db DB [flags] FILE...
//	strata compact DB [--session ID]... [--window N] [--share F] [--every-tokens N] [--every N] [--every-events M] [--fold K] [--max-roots R]
//	               [--summarizer extractive|lossy|openai] [--retries R] [--repair] [--json]
//	strata import --format openai|anthropic|claude-code|codex|gemini [--session ID] [--db DB [policy flags]] [--json] FILE...
//	strata sessions [--json] DB|URL
//	strata dump [--json|--dot] [--raw] [--session ID [--from SEQ] [--to SEQ]] DB|URL
//	strata resume DB|URL --session ID [--marker ID|latest] [--budget N] [--json]
//	strata resume --db DB|URL --session ID [--marker ID|latest] [--budget N] [--json]
//	strata verify [--json] DB|URL
//	strata backup [--json] DB|URL DEST
//	strata copy [--session ID]... [--skip-damaged] [--json] SRC DST
//	strata fork DB --session SRC [--marker ID|latest] [--fallback] --to DST [--json]
//	strata prune DB [--session ID]... [--older-than D] [--keep-last N] [--archive FILE] [--dry-run] [--json]
//	strata vacuum DB [--json]
//	strata stats [--json] [--session ID] DB|URL
//	strata eval [--window N] [--share F] [--every-tokens N] [--every N] [--every-events M]
//	            [--fold K] [--max-roots R] [--drop-rate p,...] [--stickiness ρ,...] [--retries r,...] [--grid] [--json] FILE...
//	strata serve [--addr HOST:PORT] DB
//	strata demo [DB]
//	strata version [--json]
//	strata claude-code hook|install|status|uninstall
//	strata claude-code install [--user] [--db DB] [--dir PROJECT]
//	strata claude-code uninstall [--user] [--dir PROJECT]
//	strata claude-code status [--user] [--dir PROJECT] [--db DB] [--json]
//	strata claude-code hook [--db DB] [--budget N] [--log FILE] [--timeout D] < hook-input.json
//	strata codex hook|install|status|uninstall
//	strata codex install [--user] [--db DB] [--dir PROJECT]
//	strata codex uninstall [--user] [--dir PROJECT]
//	strata codex status [--user] [--dir PROJECT] [--db DB] [--json]
//	strata codex hook [--db DB] [--budget N] [--log FILE] [--timeout D] < hook-input.json
//	strata gemini hook|install|status|uninstall
//	strata gemini install [--user] [--db DB] [--dir PROJECT]
//	strata gemini uninstall [--user] [--dir PROJECT]
//	strata gemini status [--user] [--dir PROJECT] [--db DB] [--json]
//	strata gemini hook [--db DB] [--budget N] [--log FILE] [--timeout D] < hook-input.json
//	strata completion bash|fish|powershell|zsh
//
// replay also takes --session ID (the session of lines that name none),
// --drop LIST (what the lossy summarizer drops), --budget T (a node's
// token budget), --no-sync, and for --summarizer openai --model,
// --base-url, --api-key-env, --llm-timeout and --llm-retries, as compact
// does; import takes
// --dir and --sidechains; strata COMMAND --help lists every flag.
//
// strata claude-code hook runs as Claude Code's PreCompact and
// SessionStart(compact) hook (docs/claude-code.md): it reads the hook's JSON
// on stdin, imports the session's transcript from where the store stopped,
// compacts where Claude Code cuts, and after a compaction prints the state
// the raw transcript implies there, within --budget tokens. Its store is
// --db, else .claude/strata.db of $CLAUDE_PROJECT_DIR; --log, --timeout. It
// exits 0 whatever happens, one line per run in its log:
//
//	strata claude-code hook --db .claude/strata.db --budget 2000 < hook-input.json
//
// Every command that takes a database takes it as its first argument;
// replay, resume and demo also take it as --db, and import only so:
// without --db, import converts to stdout. With replay's --db, every
// argument is a FILE.
// Where a command only reads (sessions, dump, resume, verify, backup,
// stats), DB may be the URL of a running agent's debug handler (package
// debughttp), e.g. http://127.0.0.1:6060/debug/strata: the same output,
// from one read transaction of the live database.
//
// --json prints a command's result as JSON — one document, or for replay,
// compact and import one object per line — and is the one way to ask for JSON
// everywhere. The field names of every output and the exit codes are a
// contract: 0 success, 1 error, 2 bad usage, 3 verify found problems, 130
// interrupted by Ctrl-C (143 by SIGTERM).
// Errors go to stderr as "Error: …", followed by "Hint: …" lines that say
// what to do: run verify on a damaged database, which process holds a
// locked one, what a file that is not a database is, how to list the
// sessions or markers when one asked for does not exist. With --json an
// error goes to stderr as one JSON line instead, {"error", "hints",
// "exit_code"}, with the same exit code.
//
// replay, import --db and eval compact by default so that a resumed
// context stays within a quarter (--share 0.25) of a model's window of
// 200,000 tokens (--window): at most 4 summaries of 2,048 tokens, and an L1
// node each time the raw tail reaches the 41,808 tokens they leave.
// --every-tokens, --every (turns) and --every-events state the policy by
// hand instead.
//
// Every command that only reads a database opens it read-only, waiting at
// most --timeout (default 1s) for the file lock, and never changes a byte of
// the file. A reading command (sessions, dump, resume, stats) that meets a
// damaged record stops there with status 1, never a partial answer with
// status 0: the error names the record and its session, and a hint says to
// run verify, which lists every problem (status 3). A dump has by then
// printed what came before; its error says so.
//
// strata version (and strata --version) prints the module version and the
// VCS stamp the build recorded, the Go version, and the database format
// version this strata writes. strata completion prints a shell completion
// script; --session completes the session ids of the database file named
// on the command line.
//
// strata claude-code install adds strata's hooks to Claude Code's settings
// (.claude/settings.json of the project in the current directory, or with
// --user ~/.claude/settings.json): PreCompact and SessionStart with the
// matcher compact, each running strata claude-code hook --db DB, the store
// beside the settings by default, named from $CLAUDE_PROJECT_DIR (or
// $HOME). It edits the file's text in place — everything else stays byte
// for byte — and refuses a file that is not JSON, naming its line and
// column. uninstall removes exactly what install added; status shows the
// hooks, the store and its sessions: Claude Code's compactions, strata's
// markers, and the facts the latest marker carries.
//
// strata codex install, uninstall, status and hook do the same beside
// Codex CLI (docs/codex.md): its hooks in .codex/hooks.json of the project
// or, with --user, $CODEX_HOME/hooks.json; PreCompact compacts, PostCompact
// checks the summary of Codex's compacted record, SessionStart(compact)
// prints the state for Codex to give the model.
//
// A DB may also be a postgres:// URL: strata's tables in PostgreSQL, which
// many processes read and write at once (the first caveat is the file's).
// backup of a URL writes a new bbolt file holding every session, from one
// snapshot. copy copies sessions byte for byte from SRC into DST, each a
// file or a URL: it refuses, before writing anything, a DST that holds
// another session of an id to copy; a new DST file appears whole or not at
// all; a copy into an existing DST stopped midway leaves the session it was
// writing without its state, which the same copy run again completes.
//
// # Caveats
//
//   - bbolt lets one process write a database: while an agent has it open,
//     every other open — even read-only — waits --timeout and fails saying
//     another process holds it (on Linux, which one). Read it through the
//     agent's debug handler URL, or a backup.
//   - verify runs its deep check in a child process (this executable again),
//     so that a damaged file that makes bbolt fault cannot take the check down
//     with it: the crash is reported as a problem.
//   - backup replaces an existing DEST file whole, as etcdctl snapshot save
//     and sqlite3's .backup do; it refuses the database itself, a directory,
//     and DEST "-" when stdout is a terminal.
package main
