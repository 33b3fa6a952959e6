package codex

import (
	"encoding/json"
	"path/filepath"

	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// The hook events and the SessionStart source the hook acts on, named as
// Claude Code names them (companion.EventPreCompact …).
const (
	EventPreCompact   = companion.EventPreCompact
	EventSessionStart = companion.EventSessionStart
	EventPostCompact  = companion.EventPostCompact
	SourceCompact     = companion.SourceCompact // SessionStart before the first model request after a compaction
)

// HookTimeout is the timeout, in seconds, install gives each hook: Codex
// stops a hook that runs longer (600 without one). A hook's work is an
// incremental import and one compaction; the first run on a long rollout
// imports it whole.
const HookTimeout = 30

// HomeEnv is the environment variable naming Codex's home directory, the
// user's hooks.json and config.toml among it; ~/.codex without it.
const HomeEnv = "CODEX_HOME"

// Agent is Codex's adapter (companion.Agent): its hooks PreCompact
// (compact), PostCompact (check the summary its compacted record, written
// before the hook runs, carries) and SessionStart with source "compact"
// (inject), its rollout keyed by each item's id, and its hooks.json.
type Agent struct{}

// Name implements companion.Agent: "codex".
func (Agent) Name() string { return "codex" }

// Title implements companion.Agent: "Codex".
func (Agent) Title() string { return "Codex" }

// Action implements companion.Agent: PreCompact and PostCompact (any
// trigger), and SessionStart with source "compact". Every other event and
// source is left alone.
func (Agent) Action(in *companion.Input) companion.Action { return companion.CompactionAction(in) }

// Output implements companion.Agent: SessionStart's JSON adding text to
// the context, which Codex gives the model as a developer message marked
// as a hook's output.
func (Agent) Output(_ *companion.Input, text string) ([]byte, error) {
	return companion.AdditionalContext(EventSessionStart, text)
}

// Format implements companion.Agent: transcript.Codex.
func (Agent) Format() transcript.Format { return transcript.Codex }

// IsRecord implements companion.Agent: a response_item line whose item's
// id is ref. A compacted record holds copies of earlier items, their ids
// among them, in its replacement_history: it is not their record.
func (Agent) IsRecord(line []byte, ref string) bool {
	var l struct {
		Type    string `json:"type"`
		Payload struct {
			ID string `json:"id"`
		} `json:"payload"`
	}
	return json.Unmarshal(line, &l) == nil && l.Type == "response_item" && l.Payload.ID == ref
}

// CompactionRecord implements companion.Agent: "compacted", the type of the rollout line of its compaction.
func (Agent) CompactionRecord() string { return "compacted" }

// IsCompaction implements companion.Agent: the event of a compacted
// record (transcript.IsCodexCompaction), whose summary follows it as the
// record's next event.
func (Agent) IsCompaction(e tier.Event) bool { return transcript.IsCodexCompaction(e) }

// Preserved implements companion.Agent: "". The user's messages Codex
// puts back after its summary (the compacted record's
// replacement_history) are copies of records before the cut, which the
// summary's check counts as it counts every record before the cut.
func (Agent) Preserved(*companion.TranscriptFile, tier.Event) (string, error) { return "", nil }

// Settings implements companion.Agent: .codex/hooks.json of a project or
// of the user ($CODEX_HOME/hooks.json).
func (Agent) Settings() *companion.Settings { return settings }

// settings is Codex's (Agent.Settings). Codex sets no variable naming the
// project for its hooks: a hook runs in the session's directory, which
// its input's cwd names. It refuses a hooks.json with a top-level member
// other than hooks and description, every hook in it unrun.
var settings = &companion.Settings{
	Dir:     ".codex",
	UserDir: UserDir,
	File:    "hooks.json",
	Members: []string{"hooks", "description"},
	Events:  HookEvents,
	Handler: companion.CommandHandler(HookTimeout),
}

// UserDir returns Codex's home directory: $CODEX_HOME when it is set,
// else .codex in home.
func UserDir(home string, getenv func(string) string) string {
	if d := getenv(HomeEnv); d != "" {
		return d
	}
	return filepath.Join(home, ".codex")
}

// HookEvents are the Codex hook events strata's hook runs on, each with
// the matcher of its group: PreCompact and PostCompact with none (Codex
// takes no matcher for them), SessionStart only with the source
// "compact".
var HookEvents = companion.CompactionEvents
