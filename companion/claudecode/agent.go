package claudecode

import (
	"encoding/json"

	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// The hook events and the SessionStart source the hook acts on, which
// Codex names alike (companion.EventPreCompact …).
const (
	EventPreCompact   = companion.EventPreCompact
	EventSessionStart = companion.EventSessionStart
	EventPostCompact  = companion.EventPostCompact
	SourceCompact     = companion.SourceCompact // SessionStart right after a compaction
)

// HookTimeout is the timeout, in seconds, install gives each hook: Claude
// Code stops a hook that runs longer. A hook's work is an incremental
// import and one compaction; the first run on a long transcript imports
// it whole.
const HookTimeout = 30

// Agent is Claude Code's adapter (companion.Agent): its hooks PreCompact
// (compact), PostCompact (check the summary its input carries) and
// SessionStart with source "compact" (inject), its JSONL transcript
// keyed by each record's uuid, its compact_boundary record and the
// messages it keeps verbatim after its summary, and its settings,
// .claude/settings.json.
type Agent struct{}

// Name implements companion.Agent: "claude-code".
func (Agent) Name() string { return "claude-code" }

// Title implements companion.Agent: "Claude Code".
func (Agent) Title() string { return "Claude Code" }

// Action implements companion.Agent: PreCompact and PostCompact (any
// trigger), and SessionStart with source "compact". Every other event and
// source is left alone.
func (Agent) Action(in *companion.Input) companion.Action { return companion.CompactionAction(in) }

// Output implements companion.Agent: SessionStart's JSON adding text to
// the context.
func (Agent) Output(_ *companion.Input, text string) ([]byte, error) {
	return companion.AdditionalContext(EventSessionStart, text)
}

// Format implements companion.Agent: transcript.ClaudeCode.
func (Agent) Format() transcript.Format { return transcript.ClaudeCode }

// IsRecord implements companion.Agent: the record's uuid is ref.
func (Agent) IsRecord(line []byte, ref string) bool {
	var r record
	return json.Unmarshal(line, &r) == nil && r.UUID == ref
}

// CompactionRecord implements companion.Agent: "compact_boundary", the subtype of the system record of its compaction.
func (Agent) CompactionRecord() string { return "compact_boundary" }

// IsCompaction implements companion.Agent: the event of a
// compact_boundary record (transcript.IsClaudeCodeCompaction).
func (Agent) IsCompaction(e tier.Event) bool { return transcript.IsClaudeCodeCompaction(e) }

// Preserved implements companion.Agent: the head of the compact_boundary
// record's preservedSegment, the messages Claude Code 2.1 keeps verbatim
// after its summary.
func (Agent) Preserved(t *companion.TranscriptFile, compaction tier.Event) (string, error) {
	var rec record
	_, _, found, err := t.FindLast(companion.JSONString(compaction.Ref), func(line []byte) bool {
		rec = record{}
		return json.Unmarshal(line, &rec) == nil && rec.UUID == compaction.Ref && rec.Subtype == "compact_boundary"
	})
	if err != nil || !found {
		return "", err
	}
	return rec.preservedHead(), nil
}

// Settings implements companion.Agent: .claude/settings.json of a
// project or of the user, and a project's .claude/settings.local.json.
func (Agent) Settings() *companion.Settings { return settings }

// settings is Claude Code's (Agent.Settings).
var settings = &companion.Settings{
	Dir:        ".claude",
	File:       "settings.json",
	LocalFile:  "settings.local.json",
	ProjectEnv: "CLAUDE_PROJECT_DIR",
	Events:     HookEvents,
	Handler:    companion.CommandHandler(HookTimeout),
}

// HookEvents are the Claude Code hook events strata's hook runs on, each
// with the matcher of its group: PreCompact with none, which is every
// trigger (manual and auto); SessionStart only when the session starts
// again after a compaction; PostCompact with none, whose input carries
// Claude Code's summary.
var HookEvents = companion.CompactionEvents

// record is the part of a transcript record a search verifies, and of a
// compact_boundary record the messages Claude Code kept verbatim after
// its summary (preservedSegment: from the record headUuid names to the
// one tailUuid names).
type record struct {
	UUID            string `json:"uuid"`
	Subtype         string `json:"subtype"`
	CompactMetadata *struct {
		PreservedSegment *struct {
			HeadUUID string `json:"headUuid"`
			TailUUID string `json:"tailUuid"`
		} `json:"preservedSegment"`
	} `json:"compactMetadata"`
}

// preservedHead returns the uuid of the first record Claude Code kept
// verbatim after the summary, as the compact_boundary record r names it;
// "" when it keeps none.
func (r *record) preservedHead() string {
	if m := r.CompactMetadata; m != nil && m.PreservedSegment != nil {
		return m.PreservedSegment.HeadUUID
	}
	return ""
}
