// Command strata is the command line of the strata store: it replays raw
// event logs (JSONL) into a database, compacting as it goes, and dumps,
// resumes, verifies, backs up and counts what a database holds.
//
// Usage:
//
//	strata replay --db DB [--session ID] [--every N] [--every-events M] [--fold K]
//	              [--summarizer extractive|lossy] [--drop LIST] [--retries R] [--budget T] FILE...
//	strata dump [--json] [--raw] [--session ID] DB
//	strata resume --db DB --session ID [--marker ID|latest] [--json]
//	strata verify DB
//	strata backup DB DEST
//	strata stats [--json] DB
//	strata eval [--every N] [--every-events M] [--fold K] [--drop-rate p] [--class-rate LIST]
//	            [--retries r|r1,r2,...] [--seed s] [--json] [--per-session=false] [--dir DIR] FILE...
//
// shared/spec/cli.md is the contract: the field names of every output and
// the exit codes — 0 success, 1 error, 2 bad usage, 3 verify found problems.
// Errors go to stderr as "Error: …", followed by "Hint: …" when the error
// carries one.
//
// Every command that only reads a database opens it read-only, waiting at
// most --timeout (default 1s) for the file lock, and never changes a byte of
// the file. A reading command (dump, resume, stats) that meets a damaged
// record stops there with status 1, never a partial answer with status 0:
// the error names the record and its session, and a hint says to run
// verify, which lists every problem (status 3). A dump has by then printed
// what came before; its error says so.
//
// A DB may also be a postgres:// URL: strata's tables in PostgreSQL, which
// many processes read and write at once (the first caveat is the file's);
// backup copies files only.
//
// # Caveats
//
//   - bbolt lets one process write a database: while an agent has it open,
//     every other open — even read-only — waits --timeout and fails saying
//     another process holds it. Take a backup through the agent's API and
//     read that instead.
//   - verify runs its deep check in a child process (this executable again),
//     so that a damaged file that makes bbolt fault cannot take the check down
//     with it: the crash is reported as a problem.
package main
