package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/tier"
)

// claudeRecord is one line of a Claude Code session file: the fields this
// package reads.
type claudeRecord struct {
	Type             string          `json:"type"`
	Subtype          string          `json:"subtype"`
	UUID             string          `json:"uuid"`
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

// claudeCodeReader maps the records of a Claude Code session file.
type claudeCodeReader struct {
	ant      anthropicReader
	b        *builder
	seen     map[string]bool // uuids read
	started  bool            // a user or assistant record has been read
	subagent bool            // the file is a sub-agent's transcript: its sidechain records are its own
}

func newClaudeCodeReader(b *builder) *claudeCodeReader {
	return &claudeCodeReader{ant: anthropicReader{b: b}, b: b, seen: map[string]bool{}}
}

// record maps one line.
func (r *claudeCodeReader) record(raw []byte) error {
	b := r.b
	if !json.Valid(raw) {
		var v any
		err := json.Unmarshal(raw, &v)
		msg := "invalid JSON"
		if err != nil {
			msg = err.Error()
		}
		return errors.Wrap(ErrBadJSON, msg)
	}
	if raw[0] != '{' {
		return errors.Wrap(ErrBadRecord, "a line must be a JSON object")
	}
	var rec claudeRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		b.rep.Malformed++
		return nil
	}
	if rec.UUID != "" {
		if r.seen[rec.UUID] {
			b.rep.DuplicateRecords++
			return nil
		}
		r.seen[rec.UUID] = true
	}
	conv := rec.Type == "user" || rec.Type == "assistant"
	if conv && !r.started {
		r.started = true
		r.subagent = rec.IsSidechain
	}
	if rec.IsSidechain && !r.subagent && !b.opts.Sidechains {
		b.rep.Sidechain++
		return nil
	}
	if rec.Cwd != "" && b.opts.Dir == "" {
		b.cwd = rec.Cwd
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
		kind := tier.KindAssistant
		if rec.Type == "user" {
			kind = tier.KindUser
			if rec.IsMeta || rec.IsCompactSummary {
				kind = tier.KindSystem // injected by Claude Code, not typed by the user
			}
		}
		r.ant.content(kind, msg.Content, t, claudeResultInfo(rec.ToolUseResult))
	case rec.Type == "system" && rec.Subtype == "compact_boundary":
		b.rep.Compactions++
		text := "Claude Code compacted the conversation"
		if m := rec.CompactMetadata; m != nil {
			text += fmt.Sprintf(" (trigger %s, %d tokens before)", tier.TruncateUTF8(m.Trigger, 40), m.PreTokens)
		}
		b.message(tier.KindSystem, text, t)
	case rec.Type == "system":
		b.rep.skip(&b.rep.Skipped, "system/"+rec.Subtype)
	case claudeSkipped[rec.Type]:
		b.rep.skip(&b.rep.Skipped, rec.Type)
	case rec.Type == "":
		b.rep.skip(&b.rep.Unknown, "(no type)") // not "unknown=:1"
	default:
		b.rep.skip(&b.rep.Unknown, rec.Type)
	}
	return nil
}

// claudeResultInfo reads a record's toolUseResult: the rejection string,
// an "Error: …" string, or an object naming the file a write went to.
func claudeResultInfo(raw json.RawMessage) resultInfo {
	var info resultInfo
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return info
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch {
		case s == claudeRejected:
			info.rejected = true
		case strings.HasPrefix(s, "Error"):
			info.failed = true
		}
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
