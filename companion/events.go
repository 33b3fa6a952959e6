package companion

// The hook events Claude Code and Codex both name so, with the same
// inputs, and SessionStart's source right after a compaction.
const (
	EventPreCompact   = "PreCompact"
	EventSessionStart = "SessionStart"
	EventPostCompact  = "PostCompact"
	SourceCompact     = "compact"
)

// CompactionAction is the action of a hook input of Claude Code or Codex:
// PreCompact (any trigger) compacts, PostCompact checks the summary,
// SessionStart with source "compact" injects; every other event and
// source is left alone.
func CompactionAction(in *Input) Action {
	switch {
	case in.HookEventName == EventPreCompact:
		return ActionCompact
	case in.HookEventName == EventPostCompact:
		return ActionCheck
	case in.HookEventName == EventSessionStart && in.Source == SourceCompact:
		return ActionInject
	}
	return ActionIgnore
}

// CompactionEvents are the hook events install writes for Claude Code and
// Codex, each with the matcher of its group: PreCompact and PostCompact
// with none, which is every trigger (manual and auto); SessionStart only
// with the source "compact".
var CompactionEvents = []HookEvent{
	{Name: EventPreCompact},
	{Name: EventSessionStart, Matcher: SourceCompact},
	{Name: EventPostCompact},
}

// CommandHandler returns the Settings.Handler of a hook file whose
// handlers are {"type":"command","command":…,"timeout":timeout} (Claude
// Code's and Codex's; timeout in seconds).
func CommandHandler(timeout int) func(command string) Object {
	return func(command string) Object {
		return Object{{Key: "type", Value: "command"}, {Key: "command", Value: command}, {Key: "timeout", Value: timeout}}
	}
}
