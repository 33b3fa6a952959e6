// Package realclient holds the tests that run the real coding-agent
// clients — Claude Code and Codex, installed from npm by .ci/run — offline
// against the scripted model servers of internal/fakemodel, with strata's
// hooks installed by strata itself, through a real compaction
// (docs/realclients.md). The package has no code of its own: its tests
// skip where a client is not installed.
package realclient
