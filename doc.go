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
// This package holds only the embedded sample session used by `strata demo`.
package strata

import _ "embed"

// IncidentJSONL is the seed's incident as a raw event log (JSONL): a schema
// migration in which a rollback script is written, an approach fails its dry
// run and the user rejects it — the two facts a fluent summary tends to lose.
//
//go:embed testdata/incident/migration.jsonl
var IncidentJSONL []byte
