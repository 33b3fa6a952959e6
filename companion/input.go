package companion

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// maxInputBytes bounds the hook input read from stdin: an agent's is a
// few hundred bytes.
const maxInputBytes = 1 << 20

// Input is the JSON object an agent writes to a command hook's stdin, as
// Claude Code, Codex and Gemini CLI name its fields: those every event
// carries, a compaction's trigger, SessionStart's source and Claude
// Code's PostCompact's compact_summary. Other fields are ignored.
type Input struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"` // the session's transcript file (JSONL)
	Cwd            string `json:"cwd"`             // the working directory of the session
	HookEventName  string `json:"hook_event_name"`
	Trigger        string `json:"trigger,omitempty"` // a compaction's: "manual" or "auto"
	Source         string `json:"source,omitempty"`  // SessionStart's: "startup", "resume", "clear" or "compact"
	// CompactSummary is the summary the agent made, when the input
	// carries it (Claude Code's PostCompact, which runs before the
	// summary reaches the transcript).
	CompactSummary string `json:"compact_summary,omitempty"`
	// Action is what the hook does (Agent.Action), set by ReadInput and
	// Hook.Run.
	Action Action `json:"-"`
}

// Handled reports whether the hook acts on in: its Action is not
// ActionIgnore.
func (in *Input) Handled() bool { return in.Action != ActionIgnore }

// Transcript is the transcript of a hook input, open for reading up to
// the end of its last whole line (Input.OpenTranscript).
type Transcript struct {
	in   Input
	file *TranscriptFile
}

// OpenTranscript opens in's transcript for Hook.RunTranscript, a
// transcript_path under "~/" made the user's home's, as Run reads it: for
// a caller that would otherwise make the store first. The caller closes
// it.
func (in Input) OpenTranscript() (*Transcript, error) {
	in.resolveTranscript()
	f, err := OpenTranscriptFile(in.TranscriptPath)
	if err != nil {
		return nil, err
	}
	return &Transcript{in: in, file: f}, nil
}

// Close closes the transcript's file.
func (t *Transcript) Close() error { return t.file.Close() }

// resolveTranscript makes a transcript_path under "~/" the user's home's.
func (in *Input) resolveTranscript() {
	if rest, ok := strings.CutPrefix(in.TranscriptPath, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			in.TranscriptPath = filepath.Join(home, rest)
		}
	}
}

// ReadInput reads one hook input of agent a from r (at most 1 MiB): a
// JSON object naming hook_event_name and, for an event the hook acts on
// (a.Action, which sets Input.Action), a session_id that is a store
// session id, a transcript_path, and a cwd that is an absolute path, as
// the agents always give them. Any other input is an error wrapping
// ErrBadInput that says what is wrong.
func ReadInput(a Agent, r io.Reader) (Input, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxInputBytes+1))
	if err != nil {
		return Input{}, errors.Wrap(err, "companion: reading the hook input")
	}
	if len(b) > maxInputBytes {
		return Input{}, errors.Wrapf(ErrBadInput, "over %d bytes", maxInputBytes)
	}
	var in Input
	if err := json.Unmarshal(b, &in); err != nil {
		return Input{}, errors.Wrapf(ErrBadInput, "not a JSON object (%v): %q", err, tier.ClipTo(string(b), 80))
	}
	in.Action = ActionIgnore
	if in.HookEventName != "" {
		in.Action = a.Action(&in)
	}
	switch {
	case in.HookEventName == "":
		return in, errors.Wrap(ErrBadInput, "no hook_event_name")
	case !in.Handled():
		return in, nil
	case in.SessionID == "":
		return in, errors.Wrapf(ErrBadInput, "%s without a session_id", in.HookEventName)
	case in.TranscriptPath == "":
		return in, errors.Wrapf(ErrBadInput, "%s without a transcript_path", in.HookEventName)
	case in.Cwd == "":
		return in, errors.Wrapf(ErrBadInput, "%s without a cwd", in.HookEventName)
	case !filepath.IsAbs(in.Cwd):
		return in, errors.Wrapf(ErrBadInput, "cwd %q is not an absolute path", tier.ClipTo(in.Cwd, 80))
	}
	if err := store.CheckSession(in.SessionID); err != nil {
		return in, errors.Wrapf(ErrBadInput, "session_id %q: %v", tier.ClipTo(in.SessionID, 80), err)
	}
	return in, nil
}
