package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/strata-go/strata/tier"
)

// claudeRecord is one line of a Claude Code session file: the fields this
// package reads.
type claudeRecord struct {
	Type             string          `json:"type"`
	Subtype          string          `json:"subtype"`
	UUID             string          `json:"uuid"`
	SessionID        string          `json:"sessionId"`
	AgentID          string          `json:"agentId"`
	IsSidechain      bool            `json:"isSidechain"`
	IsMeta           bool            `json:"isMeta"`
	IsCompactSummary bool            `json:"isCompactSummary"`
	Timestamp        json.RawMessage `json:"timestamp"`
	Cwd              string          `json:"cwd"`
	Message          json.RawMessage `json:"message"`
	ToolUseResult    json.RawMessage `json:"toolUseResult"`
	CompactMetadata  *struct {
		Trigger   string `json:"trigger"`
		PreTokens int64  `json:"preTokens"`
	} `json:"compactMetadata"`
}

// claudeSkipped are the record types a session file holds that carry no
// event: titles, progress, file snapshots, queue operations.
var claudeSkipped = map[string]bool{
	"summary": true, "progress": true, "file-history-snapshot": true, "queue-operation": true,
	"attachment": true, "custom-title": true, "tag": true, "last-prompt": true, "agent-name": true,
}

// claudeRejected is the toolUseResult of a tool use the user refused.
const claudeRejected = "User rejected tool use"

// ClaudeCodeCompacted begins the text of the system event a Claude Code
// compact_boundary record gives: a compaction of Claude Code's own. The
// text goes on with the record's trigger and token count when it has them.
const ClaudeCodeCompacted = "Claude Code compacted the conversation"

// IsClaudeCodeCompaction reports whether e is the event of a Claude Code
// compact_boundary record: a system event whose text begins with
// ClaudeCodeCompacted. Its Ref names the record (its uuid).
func IsClaudeCodeCompaction(e tier.Event) bool {
	return e.Kind == tier.KindSystem && strings.HasPrefix(e.Text, ClaudeCodeCompacted)
}

// claudeCodeReader maps the records of a Claude Code session file, each
// in the conversation its sessionId names.
type claudeCodeReader struct {
	ant      anthropicReader
	d        *Decoder
	seen     map[string]bool // uuids read
	started  bool            // a user or assistant record has been read
	subagent bool            // the file is a sub-agent's transcript: its sidechain records are its own
	// The records before the first that names its session, and their
	// lines: they belong to that session.
	pending [][]byte
	lines   []int
}

func newClaudeCodeReader(d *Decoder) *claudeCodeReader {
	return &claudeCodeReader{ant: anthropicReader{d: d}, d: d, seen: map[string]bool{}}
}

// record reads one line.
func (r *claudeCodeReader) record(raw []byte) error {
	if err := jsonObject(raw, "a line"); err != nil {
		return err
	}
	var rec claudeRecord
	malformed := json.Unmarshal(raw, &rec) != nil
	conv := rec.Type == "user" || rec.Type == "assistant"
	if conv && !r.started && !malformed {
		r.started = true
		r.subagent = rec.IsSidechain && !r.d.opts.MainSession
	}
	name := r.conversation(&rec)
	if name == "" && r.d.conv == nil {
		r.pending = append(r.pending, raw)
		r.lines = append(r.lines, r.d.sh.line)
		return nil
	}
	if name == "" {
		name = r.d.conv.name
	}
	if err := r.flush(name); err != nil {
		return err
	}
	if err := r.d.enter(name); err != nil {
		return err
	}
	if malformed {
		r.d.begin(raw)
		r.d.b.rep.Malformed++
		return nil
	}
	return r.mapRecord(raw, &rec)
}

// conversation returns the conversation a record names: its sessionId —
// with the agent's id in a sub-agent's file, whose records carry the
// sessionId of the session that started it — or "" when it names none.
func (r *claudeCodeReader) conversation(rec *claudeRecord) string {
	switch {
	case rec.SessionID == "":
		return ""
	case r.subagent && rec.IsSidechain && rec.AgentID != "":
		return rec.SessionID + "/agent-" + rec.AgentID
	case r.subagent && rec.IsSidechain && r.d.base != "":
		return rec.SessionID + "/" + r.d.base
	}
	return rec.SessionID
}

// flush maps the records held before the first that named its
// conversation, in name.
func (r *claudeCodeReader) flush(name string) error {
	if len(r.pending) == 0 {
		return nil
	}
	if err := r.d.enter(name); err != nil {
		return err
	}
	line := r.d.sh.line
	defer func() { r.d.sh.line = line }()
	for i, raw := range r.pending {
		r.d.sh.line = r.lines[i]
		var rec claudeRecord
		if json.Unmarshal(raw, &rec) != nil {
			r.d.begin(raw)
			r.d.b.rep.Malformed++
			continue
		}
		if err := r.mapRecord(raw, &rec); err != nil {
			return err
		}
	}
	r.pending, r.lines = nil, nil
	return nil
}

// finish maps the records still held at the end: a file whose records
// name no session is the conversation named after the file.
func (r *claudeCodeReader) finish() error {
	if len(r.pending) == 0 {
		return nil
	}
	return r.flush(r.d.base)
}

// mapRecord maps one record of the current conversation.
func (r *claudeCodeReader) mapRecord(raw []byte, rec *claudeRecord) error {
	d := r.d
	d.begin(raw)
	b := d.b
	if rec.UUID != "" {
		if r.seen[rec.UUID] {
			b.rep.DuplicateRecords++
			d.recognized++
			return nil
		}
		r.seen[rec.UUID] = true
	}
	conv := rec.Type == "user" || rec.Type == "assistant"
	if rec.IsSidechain && !r.subagent && !b.opts.Sidechains {
		b.rep.Sidechain++
		d.recognized++
		return nil
	}
	if rec.Cwd != "" && b.opts.Dir == "" {
		b.cwd = rec.Cwd
	}
	if known, err := d.stored(raw, rec.UUID); known || err != nil {
		return err
	}
	t := b.parseTime(rec.Timestamp)
	switch {
	case conv:
		var msg struct {
			Content json.RawMessage `json:"content"`
		}
		if len(rec.Message) == 0 || json.Unmarshal(rec.Message, &msg) != nil {
			b.rep.Malformed++
			return nil
		}
		d.recognized++
		kind := tier.KindAssistant
		if rec.Type == "user" {
			kind = tier.KindUser
			if rec.IsMeta || rec.IsCompactSummary || claudeClientRecord(msg.Content) {
				kind = tier.KindSystem // injected by Claude Code, not typed by the user
			}
		}
		r.ant.content(kind, msg.Content, t, claudeResultInfo(rec.ToolUseResult))
	case rec.Type == "system" && rec.Subtype == "compact_boundary":
		d.recognized++
		b.rep.Compactions++
		text := ClaudeCodeCompacted
		if m := rec.CompactMetadata; m != nil {
			text += fmt.Sprintf(" (trigger %s, %d tokens before)", tier.TruncateUTF8(m.Trigger, 40), m.PreTokens)
		}
		b.message(tier.KindSystem, text, t)
	case rec.Type == "system":
		d.recognized++
		b.rep.skip(&b.rep.Skipped, "system/"+rec.Subtype)
	case claudeSkipped[rec.Type]:
		d.recognized++
		b.rep.skip(&b.rep.Skipped, rec.Type)
	case rec.Type == "":
		b.rep.skip(&b.rep.Unknown, "(no type)") // not "unknown=:1"
	default:
		b.rep.skip(&b.rep.Unknown, rec.Type)
	}
	return nil
}

// claudeClientTags open the text of the user records Claude Code writes
// itself: a slash command's record and its output (/compact, /context),
// a shell command's output, a background task's notice, a hook's output.
// They are no request of the user's.
var claudeClientTags = []string{"<command-name>", "<command-message>", "<local-command-", "<bash-stdout>",
	"<bash-stderr>", "<task-notification>", "<user-prompt-submit-hook>"}

// claudeClientRecord reports whether a user record's content is one of
// Claude Code's own: its text (a string, or its first text block) opens
// with one of claudeClientTags.
func claudeClientRecord(content json.RawMessage) bool {
	var text string
	if json.Unmarshal(content, &text) != nil {
		var blocks []block
		if json.Unmarshal(content, &blocks) != nil {
			return false
		}
		for _, b := range blocks {
			if b.Type == "text" {
				text = b.Text
				break
			}
		}
	}
	text = strings.TrimSpace(text)
	for _, tag := range claudeClientTags {
		if strings.HasPrefix(text, tag) {
			return true
		}
	}
	return false
}

// claudeResultInfo reads a record's toolUseResult: the rejection string,
// or an object naming the file a write went to. Whether the result failed
// is its tool_result block's is_error: the "Error: …" string Claude Code
// puts in toolUseResult beside a failed result repeats the result's text.
func claudeResultInfo(raw json.RawMessage) resultInfo {
	var info resultInfo
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return info
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		info.rejected = s == claudeRejected
		return info
	}
	var obj struct {
		FilePath string `json:"filePath"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.FilePath != "" {
		info.paths = []string{obj.FilePath}
	}
	return info
}
