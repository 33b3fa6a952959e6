package transcript

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/strata-go/strata/tier"
)

// codexLine is one line of a Codex rollout: {timestamp, type, payload}.
type codexLine struct {
	Timestamp json.RawMessage `json:"timestamp"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
	// Metadata is the line's own (Codex 0.171): compaction_output marks
	// the item the model answered a compaction request with — the
	// summary, which the compacted record after it carries again.
	Metadata struct {
		CompactionOutput bool `json:"compaction_output"`
	} `json:"metadata"`
}

// codexItem is the payload of a response_item line (a Responses API item
// as Codex keeps it) and of the event_msg lines this package reads.
type codexItem struct {
	openaiMessage
	Action           json.RawMessage `json:"action"` // local_shell_call
	EncryptedContent json.RawMessage `json:"encrypted_content"`
	Meta             *struct {
		Kinds []string `json:"content_item_kinds"`
		Items []struct {
			Provenance struct {
				Type string `json:"type"`
				Hook bool   `json:"hook"`
			} `json:"provenance"`
		} `json:"content_item_metadata"`
	} `json:"internal_chat_message_metadata_passthrough"`

	// event_msg: exec_command_end, patch_apply_end, item_completed.
	ExitCode *int                       `json:"exit_code"`
	Success  *bool                      `json:"success"`
	Changes  map[string]json.RawMessage `json:"changes"`
	Item     *codexItem                 `json:"item"`
}

// codexEnd is what a call's end event says of it: the structured failure
// (an exit code, a patch that did not apply) and the files it changed.
type codexEnd struct {
	failed bool
	paths  []string
}

// CodexCompacted is the text of the system event a Codex compacted record
// gives: a compaction of Codex's own, where Codex cut. The summary Codex
// kept (the record's message), when it has text, follows as a system
// event of the same record.
const CodexCompacted = "Codex compacted the conversation"

// IsCodexCompaction reports whether e is the event of a Codex compacted
// record. Its Ref names the record: "compacted:" and a hash of the line.
func IsCodexCompaction(e tier.Event) bool {
	return e.Kind == tier.KindSystem && e.Text == CodexCompacted
}

// codexContextTags begin the user-role messages Codex writes itself (the
// environment, AGENTS.md, a turn's abort), before its rollouts marked
// where each content item came from.
var codexContextTags = []string{
	"<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<INSTRUCTIONS>",
	"<recommended_plugins>", "<turn_aborted>", "<user_shell_command>", "<skill>", "<subagent_notification>",
}

// codexRecords are the line types of a rollout that carry no event.
var codexRecords = map[string]bool{"session_meta": true, "turn_context": true, "world_state": true, "token_usage_record": true}

// codexReader maps the lines of a Codex rollout: one thread, the session
// its session_meta names.
type codexReader struct {
	d       *Decoder
	oa      openaiReader
	session string              // the first session_meta's id
	seen    map[string]bool     // refs read
	ends    map[string]codexEnd // by call_id: the end events read
	pending [][]byte            // the lines before the first session_meta
	lines   []int
}

func newCodexReader(d *Decoder) *codexReader {
	return &codexReader{d: d, oa: openaiReader{d: d}, seen: map[string]bool{}, ends: map[string]codexEnd{}}
}

// record reads one line.
func (r *codexReader) record(raw []byte) error {
	if err := jsonObject(raw, "a line"); err != nil {
		return err
	}
	var l codexLine
	malformed := json.Unmarshal(raw, &l) != nil
	if !malformed && l.Type == "session_meta" && r.session == "" {
		var meta struct {
			ID        string `json:"id"`
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal(l.Payload, &meta) == nil {
			r.session = firstOf(meta.ID, meta.SessionID)
		}
	}
	if r.session == "" {
		r.pending = append(r.pending, raw)
		r.lines = append(r.lines, r.d.sh.line)
		return nil
	}
	if err := r.flush(r.session); err != nil {
		return err
	}
	return r.mapLine(raw, malformed)
}

// firstOf returns the first of its arguments that is not empty.
func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// flush maps the lines held before the first session_meta, in name.
func (r *codexReader) flush(name string) error {
	if err := r.d.enter(name); err != nil {
		return err
	}
	if len(r.pending) == 0 {
		return nil
	}
	line := r.d.sh.line
	defer func() { r.d.sh.line = line }()
	for i, raw := range r.pending {
		r.d.sh.line = r.lines[i]
		var l codexLine
		if err := r.mapLine(raw, json.Unmarshal(raw, &l) != nil); err != nil {
			return err
		}
	}
	r.pending, r.lines = nil, nil
	return nil
}

// finish maps the lines still held at the end: a rollout without a
// session_meta is the conversation named after the file.
func (r *codexReader) finish() error {
	if len(r.pending) == 0 {
		return nil
	}
	return r.flush(r.d.base)
}

// mapLine maps one line of the current conversation.
func (r *codexReader) mapLine(raw []byte, malformed bool) error {
	d := r.d
	d.begin(raw)
	b := d.b
	var l codexLine
	if malformed || json.Unmarshal(raw, &l) != nil {
		b.rep.Malformed++
		return nil
	}
	var p codexItem
	if len(l.Payload) > 0 && json.Unmarshal(l.Payload, &p) != nil {
		b.rep.Malformed++
		return nil
	}
	t := b.parseTime(l.Timestamp)
	switch {
	case codexRecords[l.Type]:
		d.recognized++
		if l.Type == "session_meta" || l.Type == "turn_context" {
			var c struct {
				Cwd string `json:"cwd"`
			}
			if json.Unmarshal(l.Payload, &c) == nil && c.Cwd != "" && b.opts.Dir == "" {
				b.cwd = c.Cwd
			}
		}
		b.rep.skip(&b.rep.Skipped, l.Type)
	case l.Type == "event_msg":
		d.recognized++
		r.event(&p)
	case l.Type == "response_item" && l.Metadata.CompactionOutput:
		d.recognized++
		b.rep.skip(&b.rep.Skipped, "compaction_output")
	case l.Type == "response_item":
		d.recognized++
		return r.item(raw, &p, t)
	case l.Type == "compacted":
		d.recognized++
		if known, err := r.stored(raw, compactedRef(raw)); known || err != nil {
			return err
		}
		b.rep.Compactions++
		b.message(tier.KindSystem, CodexCompacted, t)
		var c struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(l.Payload, &c) == nil {
			b.message(tier.KindSystem, c.Message, t)
		}
	case l.Type == "":
		b.rep.skip(&b.rep.Unknown, "(no type)")
	default:
		b.rep.skip(&b.rep.Unknown, l.Type)
	}
	return nil
}

// compactedRef is the ref of a compacted record, which has no id: the
// first 16 hex digits of the SHA-256 of its JSON without insignificant
// space, after "compacted:". Unlike a ref derived from the record's
// position, it is the same whether the rollout is read whole or from an
// item the session holds on (an incremental import).
func compactedRef(raw []byte) string {
	h := sha256.Sum256(compactJSON(raw))
	return "compacted:" + hex.EncodeToString(h[:8])
}

// stored names the record by its ref — id, else the position and a hash —
// and reports whether the session holds it or it was read already.
func (r *codexReader) stored(raw []byte, id string) (bool, error) {
	known, err := r.d.stored(raw, id)
	if known || err != nil {
		return known, err
	}
	if r.seen[r.d.b.ref] {
		r.d.b.rep.DuplicateRecords++
		return true, nil
	}
	r.seen[r.d.b.ref] = true
	return false, nil
}

// event reads an event_msg: the end of a command or a patch, kept for the
// call's output; every other event is a copy of an item or progress.
func (r *codexReader) event(p *codexItem) {
	b := r.d.b
	switch p.Type {
	case "exec_command_end":
		r.ends[p.CallID] = codexEnd{failed: p.ExitCode != nil && *p.ExitCode != 0}
	case "patch_apply_end":
		r.ends[p.CallID] = codexEnd{failed: p.Success != nil && !*p.Success, paths: changedPaths(p.Changes)}
	case "item_completed":
		it := p.Item
		if it == nil {
			b.rep.Malformed++
			return
		}
		id, status := str(it.ID), str(it.Status)
		switch it.Type {
		case "CommandExecution":
			failed := status == "failed" || status == "declined"
			if it.ExitCode != nil {
				failed = *it.ExitCode != 0
			}
			r.ends[id] = codexEnd{failed: failed}
		case "FileChange":
			r.ends[id] = codexEnd{failed: status == "failed" || status == "declined", paths: changedPaths(it.Changes)}
		}
		b.rep.skip(&b.rep.Skipped, "event_msg/item_completed")
	default:
		b.rep.skip(&b.rep.Skipped, "event_msg/"+p.Type)
	}
}

// changedPaths returns the files a patch event added or updated (a move
// counts as its target), sorted.
func changedPaths(changes map[string]json.RawMessage) []string {
	var out []string
	for _, path := range slices.Sorted(maps.Keys(changes)) {
		var c struct {
			Type     string `json:"type"`
			MovePath string `json:"move_path"`
		}
		_ = json.Unmarshal(changes[path], &c) // a change of another shape is a write of path
		switch {
		case c.Type == "delete":
		case c.MovePath != "":
			out = append(out, c.MovePath)
		default:
			out = append(out, path)
		}
	}
	return out
}

// item maps a response_item.
func (r *codexReader) item(raw []byte, p *codexItem, t int64) error {
	b := r.d.b
	id := str(p.ID)
	if id == "" && p.CallID != "" {
		id = p.Type + ":" + p.CallID
	}
	switch p.Type {
	case "reasoning", "compaction", "compaction_summary", "ghost_snapshot":
		// Reasoning and the server's compaction are encrypted; a ghost
		// snapshot is a git commit of the worktree.
		b.rep.skip(&b.rep.Skipped, p.Type)
		return nil
	}
	if known, err := r.stored(raw, id); known || err != nil {
		return err
	}
	switch p.Type {
	case "message":
		r.message(p, t)
	case "function_call":
		b.call(p.CallID, p.Name, argText(p.Arguments), t)
	case "custom_tool_call":
		b.call(p.CallID, p.Name, argText(p.Input), t)
	case "local_shell_call":
		b.call(p.CallID, "local_shell", compactJSON(p.Action), t)
		if s := str(p.Status); s == "completed" || s == "incomplete" {
			r.ends[p.CallID] = codexEnd{failed: s == "incomplete"}
		}
	case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
		text, exit := r.output(p.Output)
		end := r.ends[p.CallID]
		info := resultInfo{failed: end.failed || (exit != nil && *exit != 0), paths: end.paths}
		b.result(p.CallID, text, info, t)
	default:
		b.rep.skip(&b.rep.Unknown, "item/"+p.Type)
	}
	return nil
}

// output reads a call's output: text, a list of content parts, or the
// JSON envelope older versions wrote ({"output": …, "metadata":
// {"exit_code": N}}), whose exit code is the harness's own field.
func (r *codexReader) output(raw json.RawMessage) (string, *int) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return r.oa.text(raw), nil
	}
	var env struct {
		Output   *string `json:"output"`
		Metadata *struct {
			ExitCode *int `json:"exit_code"`
		} `json:"metadata"`
	}
	if t := strings.TrimSpace(s); strings.HasPrefix(t, "{") && json.Unmarshal([]byte(t), &env) == nil && env.Output != nil && env.Metadata != nil {
		return *env.Output, env.Metadata.ExitCode
	}
	return s, nil
}

// message maps a message item. The user's words are the content a user
// message carries as the user's: Codex marks each content item's
// provenance (content_item_metadata); before it did, the context Codex
// writes as user messages begins with a tag of its own. Context is a
// system event; hook output (the additional context a hook gave, strata's
// own injection among it) and developer instructions are left out.
func (r *codexReader) message(p *codexItem, t int64) {
	b := r.d.b
	switch p.Role {
	case "developer":
		if r.fromHook(p) {
			b.rep.skip(&b.rep.Skipped, "hook_context")
		} else {
			b.rep.skip(&b.rep.Skipped, "developer")
		}
		return
	case "assistant":
		b.message(tier.KindAssistant, r.oa.text(p.Content), t)
		return
	case "system":
		b.message(tier.KindSystem, r.oa.text(p.Content), t)
		return
	case "user":
	default:
		b.rep.skip(&b.rep.Unknown, "role/"+p.Role)
		return
	}
	if p.Meta != nil && len(p.Meta.Items) > 0 {
		var parts []json.RawMessage
		if json.Unmarshal(p.Content, &parts) != nil || len(parts) != len(p.Meta.Items) {
			b.rep.Malformed++
			return
		}
		var user, context []json.RawMessage
		for i, part := range parts {
			pv := p.Meta.Items[i].Provenance
			switch {
			case pv.Hook:
				b.rep.skip(&b.rep.Skipped, "hook_context")
			case pv.Type == "user":
				user = append(user, part)
			default:
				context = append(context, part)
			}
		}
		r.parts(tier.KindSystem, context, t)
		r.parts(tier.KindUser, user, t)
		return
	}
	text := r.oa.text(p.Content)
	kind := tier.KindUser
	for _, tag := range codexContextTags {
		if strings.HasPrefix(strings.TrimSpace(text), tag) {
			kind = tier.KindSystem
		}
	}
	textMessage(b, kind, text, t)
}

// parts emits the text of content parts as one event of kind.
func (r *codexReader) parts(kind tier.Kind, parts []json.RawMessage, t int64) {
	if len(parts) == 0 {
		return
	}
	raw, _ := json.Marshal(parts) // of values just decoded
	textMessage(r.d.b, kind, r.oa.text(raw), t)
}

// fromHook reports whether every content item of a message is a hook's
// output.
func (r *codexReader) fromHook(p *codexItem) bool {
	if p.Meta == nil || len(p.Meta.Items) == 0 {
		return false
	}
	for _, it := range p.Meta.Items {
		if !it.Provenance.Hook {
			return false
		}
	}
	return true
}
