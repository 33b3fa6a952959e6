package gemini

import (
	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// The hook events the hook acts on.
const (
	EventPreCompress = "PreCompress"
	EventBeforeAgent = "BeforeAgent"
)

// HookTimeout is the timeout install gives each hook, in milliseconds as
// Gemini CLI reads it: it stops a hook that runs longer. A hook's work is
// a read of the chat and at most one compaction.
const HookTimeout = 30000

// Agent is Gemini CLI's adapter (companion.Agent): its hooks PreCompress
// (import, and check the summary of a compression the chat records) and
// BeforeAgent (inject once after a compression), its JSONL chat keyed by
// its messages' and calls' ids, the compression its "$set" history
// records, and its settings, .gemini/settings.json.
//
// Gemini CLI 0.61.0 runs PreCompress before every turn of the model,
// whether it compresses or not (the hook runs before its threshold
// check), so PreCompress compacts nothing: the compaction at the boundary
// is made by the first BeforeAgent after the chat records a compression,
// which injects the state there, once.
type Agent struct{}

// Name implements companion.Agent: "gemini".
func (Agent) Name() string { return "gemini" }

// Title implements companion.Agent: "Gemini CLI".
func (Agent) Title() string { return "Gemini CLI" }

// Action implements companion.Agent: PreCompress (any trigger) checks,
// BeforeAgent injects once. Every other event is left alone.
func (Agent) Action(in *companion.Input) companion.Action {
	switch in.HookEventName {
	case EventPreCompress:
		return companion.ActionCheck
	case EventBeforeAgent:
		return companion.ActionInjectOnce
	}
	return companion.ActionIgnore
}

// Output implements companion.Agent: BeforeAgent's JSON adding text to
// the context, which Gemini CLI appends to the user's prompt inside
// <hook_context> tags.
func (Agent) Output(_ *companion.Input, text string) ([]byte, error) {
	return companion.AdditionalContext(EventBeforeAgent, text)
}

// Format implements companion.Agent: transcript.Gemini.
func (Agent) Format() transcript.Format { return transcript.Gemini }

// IsRecord implements companion.Agent: never; the import does not ask
// (ReadsWhole).
func (Agent) IsRecord([]byte, string) bool { return false }

// ReadsWhole implements companion.WholeReader: true. A chat's "$set"
// history records are read against every record before them (which
// messages they drop, which they copy), so every import reads the whole
// chat, leaving out the records the session holds.
func (Agent) ReadsWhole() bool { return true }

// CompactionRecord implements companion.Agent: "compression", the
// "$set" record of one.
func (Agent) CompactionRecord() string { return "compression" }

// IsCompaction implements companion.Agent: the event of a compression
// (transcript.IsGeminiCompression).
func (Agent) IsCompaction(e tier.Event) bool { return transcript.IsGeminiCompression(e) }

// Preserved implements companion.Agent: the ref of what the compression
// kept as it was, which its event names (transcript.GeminiKeptFrom).
func (Agent) Preserved(_ *companion.TranscriptFile, compaction tier.Event) (string, error) {
	return transcript.GeminiKeptFrom(compaction), nil
}

// Settings implements companion.Agent: .gemini/settings.json of a
// project or of the user.
func (Agent) Settings() *companion.Settings { return settings }

// settings is Gemini CLI's (Agent.Settings).
var settings = &companion.Settings{
	Dir:        ".gemini",
	File:       "settings.json",
	ProjectEnv: "GEMINI_PROJECT_DIR",
	Comments:   true,
	Events:     HookEvents,
	Handler: func(command string) companion.Object {
		return companion.Object{{Key: "type", Value: "command"}, {Key: "command", Value: command}, {Key: "timeout", Value: HookTimeout}}
	},
}

// HookEvents are the Gemini CLI hook events strata's hook runs on, with
// no matcher: PreCompress (every trigger) and BeforeAgent.
var HookEvents = []companion.HookEvent{
	{Name: EventPreCompress},
	{Name: EventBeforeAgent},
}
