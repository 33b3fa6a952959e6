package companion

import (
	"encoding/json"
	"strings"

	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// Agent is one coding agent's adapter: what strata must know of the agent
// to run beside it. Everything else is the companion's and the same for
// every agent: the incremental import of the transcript (Import), the
// compaction at the boundary, the check of the agent's summary (Check),
// the state injected (State), the hook's log line (Result.Line), the
// status of a store (Sessions), and the install, uninstall and status of
// strata's hooks in the agent's settings (Install, Uninstall,
// InstalledHooks).
//
// An adapter is a value of a type of its own package
// (companion/claudecode.Agent); the CLI lists the adapters it offers,
// one line each, and makes `strata NAME install|uninstall|status|hook`
// of each.
type Agent interface {
	// Name is the agent's name on the command line: `strata NAME hook`
	// ("claude-code").
	Name() string
	// Title is the agent's name in prose ("Claude Code").
	Title() string

	// Action returns what the hook does for an input (its event, its
	// trigger or source): ActionIgnore for every event and source the
	// agent's hooks do not need.
	Action(in *Input) Action
	// Output returns what the hook prints on stdout to add text, the
	// state at the boundary, to the agent's context after an inject
	// action on in (AdditionalContext for the agents whose hooks take a
	// hookSpecificOutput.additionalContext).
	Output(in *Input, text string) ([]byte, error)

	// Format is the format the agent's transcript is read in
	// (transcript.Read), every record's event carrying the ref of its
	// record: the transcript's own id, or a derived ref ("N:hash",
	// holding a colon) for a record without one.
	Format() transcript.Format
	// IsRecord reports whether line, a whole line of the transcript
	// holding ref as a JSON string, is the record whose events carry ref:
	// an incremental import searches the file backwards for the last ref
	// the session holds and reads from the line after that record.
	IsRecord(line []byte, ref string) bool
	// IsCompaction reports whether e is the event the import made of the
	// agent's own record of a compaction (its boundary), which the
	// import stores as a system event: the summary the agent made is the
	// system events right after it — the rest of that record's events
	// when the record carries the summary (Codex's compacted record), or
	// the next record's (Claude Code's isCompactSummary record). An agent
	// whose transcript records no compaction returns false: its boundary
	// is the head its pre-compaction hook compacted.
	IsCompaction(e tier.Event) bool
	// CompactionRecord names the agent's record of a compaction as the
	// hook's log does ("compact_boundary"): "no_compact_boundary" when a
	// hook finds none, "compact_boundary_not_written_yet" when it finds
	// none after the head the compaction's hook compacted. "" for an
	// agent whose transcript records none (IsCompaction is always false):
	// its boundary is the head its pre-compaction hook compacted, which
	// the log does not remark on.
	CompactionRecord() string
	// Preserved returns the ref of the first record the agent keeps
	// verbatim in its context after its summary, as its record of the
	// compaction (whose event is compaction, in t) says; "" when it
	// keeps none. The summary stands for the events before that record.
	Preserved(t *TranscriptFile, compaction tier.Event) (ref string, err error)

	// Settings is where the agent keeps its hooks, and their shape.
	Settings() *Settings
}

// Action is what the hook does for one hook input.
type Action int

// The actions of a hook.
const (
	// ActionIgnore does nothing: the transcript is not opened.
	ActionIgnore Action = iota
	// ActionCompact imports the transcript and compacts the session's
	// head, so that a marker stands where the agent is about to cut (the
	// agent's PreCompact). It first checks the summary of the compaction
	// before, when its records reached the transcript unchecked.
	ActionCompact
	// ActionCheck imports the transcript and checks the agent's summary
	// of its compaction — the records of it, or the input's
	// CompactSummary — against the state at the boundary, storing the
	// check once (the agent's PostCompact).
	ActionCheck
	// ActionInject imports the transcript, makes sure a marker stands at
	// the boundary, checks the summary when its records are there, and
	// outputs the state at the boundary (the agent's SessionStart after
	// a compaction).
	ActionInject
	// ActionInjectOnce is ActionInject at the first hook after a
	// compaction only, for an agent with no hook right after its
	// compaction (Gemini CLI's BeforeAgent after a compression its chat
	// records): the injection is stored as a system event whose ref
	// names the boundary, and a later hook finding it injects nothing.
	ActionInjectOnce
)

// String names the action as the docs do.
func (a Action) String() string {
	switch a {
	case ActionCompact:
		return "compact"
	case ActionCheck:
		return "check"
	case ActionInject:
		return "inject"
	case ActionInjectOnce:
		return "inject-once"
	}
	return "ignore"
}

// Settings is where an agent keeps its hooks and the shape of their
// file. The file is a JSON object whose "hooks" member maps each hook
// event to a list of groups, {"matcher": …, "hooks": [handler, …]}, as
// Claude Code, Codex and Gemini CLI read it.
type Settings struct {
	// Dir is the agent's directory in a project and in the home
	// directory (".claude"): the settings file is in it, and the store
	// and its log by default.
	Dir string
	// UserDir, when set, returns the user's directory of the agent
	// instead of Dir in home (Codex: $CODEX_HOME when set).
	UserDir func(home string, getenv func(string) string) string
	// File is the file in Dir holding the hooks ("settings.json").
	File string
	// LocalFile is the file of one person's settings of a project beside
	// File whose hooks the agent runs too ("settings.local.json"); "" for
	// none.
	LocalFile string
	// ProjectEnv is the environment variable the agent sets for its
	// hooks to the project's directory ("CLAUDE_PROJECT_DIR"); "" for
	// none: the hook's input's cwd is the project then.
	ProjectEnv string
	// Comments says the agent reads the file with comments and trailing
	// commas (JSONC); without it a file holding them is refused.
	Comments bool
	// Members are the top-level members the agent allows in the file,
	// nil for any: the agent refuses the whole file, its hooks unrun,
	// when it holds another (Codex: "hooks" and "description"). Install,
	// uninstall and status refuse such a file (a *SyntaxError at the
	// member) rather than edit hooks the agent will not run.
	Members []string
	// Events are the hook events strata's hook runs on, each with the
	// matcher of its group ("" for none), in the order install writes
	// them.
	Events []HookEvent
	// Handler returns strata's hook handler running command, as it
	// stands in the file: an object whose members are in order
	// (Claude Code's {"type":"command","command":…,"timeout":30}).
	Handler func(command string) Object
}

// HookEvent is a hook event strata's hook runs on, and the matcher of its
// group.
type HookEvent struct {
	Name, Matcher string
}

// Object is a JSON object whose members keep their order when written.
type Object []Member

// Member is a member of an Object: Value is a string, a number, a bool,
// an Object or a []any of these.
type Member struct {
	Key   string
	Value any
}

// AdditionalContext returns the hook output that adds text to an agent's
// context after hook event, {"hookSpecificOutput":{"hookEventName":event,
// "additionalContext":text}}, as Claude Code, Codex and Gemini CLI read
// it: one line, HTML characters unescaped.
func AdditionalContext(event, text string) ([]byte, error) {
	type specific struct {
		HookEventName     string `json:"hookEventName"`
		AdditionalContext string `json:"additionalContext"`
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		HookSpecificOutput specific `json:"hookSpecificOutput"`
	}{specific{event, text}})
	return []byte(b.String()), err
}
