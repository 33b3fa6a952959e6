// Package strata is an embedded, persistent hierarchical summary store for
// long-running AI agents: the raw log (L0), turn summaries (L1) and session
// digests (L2, …) in one bbolt file, with a compaction transaction that
// commits a recovery marker only when the summary provably carries the state
// the raw log implies.
//
// The library is in the sub-packages: store (the database: Open, Append,
// Resume, Backup, Verify), compaction (summarizers and policies) with
// compaction/openai (a summarizer for OpenAI-compatible endpoints), the pure
// packages tier (events, ledger, nodes), marker (the three conditions) and
// checkpoint (raw checkpoints and the canonical resumed context), and around
// them transcript (OpenAI, Anthropic and Claude Code transcripts as events),
// dump (the JSON, text and Graphviz renderings of a snapshot) and debughttp
// (an http.Handler serving a running agent's database). The command-line
// tool is cmd/strata.
//
// Importing this package links the bbolt file and PostgreSQL backends into
// store.Open; otherwise it holds only embedded sample sessions: the one
// `strata demo` replays, and the seed's incident, which the tests replay.
package strata

import _ "embed"

// IncidentJSONL is the seed's incident as a raw event log (JSONL): a schema
// migration in which a rollback script is written, an approach fails its dry
// run and the user rejects it — the two facts a fluent summary tends to lose.
//
//go:embed testdata/incident/migration.jsonl
var IncidentJSONL []byte

// DemoJSONL is the session `strata demo` replays: the same incident in a
// coding session of realistic size — 60 events, 13 KB: a directory listing,
// a table's schema, SQL files written and read, a dry run that fails with
// its error, a test run with its failure — long enough for the default
// policy, on size, to compact it several times.
//
//go:embed testdata/demo/session.jsonl
var DemoJSONL []byte
