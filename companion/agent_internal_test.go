package companion

import (
	"bytes"
	"encoding/json"

	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// testAgent reads Claude Code transcripts, keyed by their records' uuids,
// for the tests of the companion's own parts: the adapter of
// companion/claudecode imports companion, and an internal test cannot
// import it back.
type testAgent struct{}

func (testAgent) Name() string  { return "test-agent" }
func (testAgent) Title() string { return "Test Agent" }
func (testAgent) Action(in *Input) Action {
	switch in.HookEventName {
	case "PreCompact":
		return ActionCompact
	case "PostCompact":
		return ActionCheck
	case "SessionStart":
		return ActionInject
	}
	return ActionIgnore
}
func (testAgent) Output(_ *Input, text string) ([]byte, error) {
	return AdditionalContext("SessionStart", text)
}
func (testAgent) Format() transcript.Format { return transcript.ClaudeCode }
func (testAgent) IsRecord(line []byte, ref string) bool {
	var r struct {
		UUID string `json:"uuid"`
	}
	return json.Unmarshal(line, &r) == nil && r.UUID == ref
}
func (testAgent) IsCompaction(e tier.Event) bool { return transcript.IsClaudeCodeCompaction(e) }
func (testAgent) CompactionRecord() string       { return "compact_boundary" }
func (testAgent) Preserved(*TranscriptFile, tier.Event) (string, error) {
	return "", nil
}
func (testAgent) Settings() *Settings { return &Settings{Dir: ".test", File: "settings.json"} }

// codexAgent reads Codex rollouts, whose compacted record carries the
// summary itself.
type codexAgent struct{ testAgent }

func (codexAgent) Format() transcript.Format { return transcript.Codex }
func (codexAgent) IsRecord(line []byte, ref string) bool {
	return bytes.Contains(line, []byte(JSONString(ref)))
}
func (codexAgent) IsCompaction(e tier.Event) bool { return transcript.IsCodexCompaction(e) }
func (codexAgent) CompactionRecord() string       { return "compacted" }

// onceAgent has no hook right after its compaction and its transcript no
// record of one: it compacts at its PreCompact and injects at the first
// BeforeAgent after it, once — ActionInjectOnce at the boundary the
// compaction's hook compacted. (Gemini CLI records its compressions: its
// adapter checks at PreCompress and compacts at the first BeforeAgent
// after a recorded one, which companion/gemini's tests run.)
type onceAgent struct{ testAgent }

func (onceAgent) Action(in *Input) Action {
	switch in.HookEventName {
	case "PreCompact":
		return ActionCompact
	case "BeforeAgent":
		return ActionInjectOnce
	}
	return ActionIgnore
}
func (onceAgent) IsCompaction(tier.Event) bool { return false }
func (onceAgent) CompactionRecord() string     { return "" }
