package claudecode

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

// The hook events and the SessionStart source the hook acts on.
const (
	EventPreCompact   = "PreCompact"
	EventSessionStart = "SessionStart"
	EventPostCompact  = "PostCompact"
	SourceCompact     = "compact" // SessionStart right after a compaction
)

// maxInputBytes bounds the hook input read from stdin: Claude Code's is
// a few hundred bytes.
const maxInputBytes = 1 << 20

// Input is the JSON object Claude Code writes to a command hook's stdin:
// the fields every event carries, PreCompact's and PostCompact's trigger,
// SessionStart's source and PostCompact's compact_summary. Other fields
// are ignored.
type Input struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"` // the session's transcript file (JSONL)
	Cwd            string `json:"cwd"`             // the working directory of the session
	HookEventName  string `json:"hook_event_name"`
	Trigger        string `json:"trigger,omitempty"` // PreCompact, PostCompact: "manual" (/compact) or "auto"
	Source         string `json:"source,omitempty"`  // SessionStart: "startup", "resume", "clear" or "compact"
	// CompactSummary is PostCompact's: the summary Claude Code made, which
	// it writes to the transcript only after the hook ran.
	CompactSummary string `json:"compact_summary,omitempty"`
}

// Handled reports whether the hook acts on in: PreCompact and PostCompact
// (any trigger), and SessionStart with source "compact". Every other event
// and source is left alone.
func (in *Input) Handled() bool {
	return in.HookEventName == EventPreCompact || in.HookEventName == EventPostCompact ||
		in.HookEventName == EventSessionStart && in.Source == SourceCompact
}

// Transcript is the transcript of a hook input, open for reading up to
// the end of its last whole line (Input.OpenTranscript).
type Transcript struct {
	in   Input
	file *transcriptFile
}

// OpenTranscript opens in's transcript for Hook.RunTranscript, a
// transcript_path under "~/" made the user's home's, as Run reads it: for
// a caller that would otherwise make the store first. The caller closes
// it.
func (in Input) OpenTranscript() (*Transcript, error) {
	in.resolveTranscript()
	f, err := openTranscript(in.TranscriptPath)
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

// ReadInput reads one hook input from r (at most 1 MiB): a JSON object
// naming hook_event_name and, for an event the hook acts on (Handled),
// a session_id that is a store session id, a transcript_path, and a cwd
// that is an absolute path, as Claude Code always gives it. Any other
// input is an error wrapping ErrBadInput that says what is wrong.
func ReadInput(r io.Reader) (Input, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxInputBytes+1))
	if err != nil {
		return Input{}, errors.Wrap(err, "claudecode: reading the hook input")
	}
	if len(b) > maxInputBytes {
		return Input{}, errors.Wrapf(ErrBadInput, "over %d bytes", maxInputBytes)
	}
	var in Input
	if err := json.Unmarshal(b, &in); err != nil {
		return Input{}, errors.Wrapf(ErrBadInput, "not a JSON object (%v): %q", err, tier.ClipTo(string(b), 80))
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
