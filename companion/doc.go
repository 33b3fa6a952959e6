// Package companion holds what strata does beside a coding agent whatever
// the agent: the parts of its hooks that no agent's format decides. Each
// agent's adapter (companion/claudecode for Claude Code) reads its own
// transcripts and hook input and writes its own settings; the CLI's
// `strata claude-code …` commands hold flags and printing only.
package companion
