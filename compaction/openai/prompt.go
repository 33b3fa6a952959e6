package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/tier"
)

// maxEventText caps the text of one event in the prompt, and
// maxChildNarrative the narrative of one child node.
const (
	maxEventText      = 400
	maxChildNarrative = 16 << 10
)

// systemPrompt says what to answer and the JSON schema: tier.Claims with
// kinds and states by name.
const systemPrompt = `You summarize one span of an AI agent's session for strata, a store that checks every summary against the raw log before it trusts it. The agent will later resume from your summary instead of the raw events.

Answer with one JSON object and nothing else (no prose, no code fence):
{
  "narrative": "<plain text>",
  "claims": {
    "resolved":     [{"id": "<id>", "seq": <the seq that opened it>}, ...],
    "unresolved":   [{"id": "<id>", "kind": "tool_call" | "open", "name": "<tool or resource>", "seq": <number>}, ...],
    "failures":     [{"id": "<id>", "seq": <the seq that opened it>}, ...],
    "dispositions": [{"key": "<key>", "state": "rejected" | "failed" | "superseded" | "succeeded", "reason": "<why>", "by": "<replacing key>", "seq": <number>}, ...],
    "constraints":  [{"key": "<key>", "text": "<the constraint>", "withdrawn": true | false, "seq": <number>}, ...],
    "artifacts":    [{"key": "<path or name>", "text": "<what it is>", "seq": <number>}, ...],
    "requests":     [{"seq": <the user event's seq>}, ...],
    "plan":         [{"key": "<the item>", "status": "pending" | "in_progress", "index": <number>, "seq": <the plan call's seq>}, ...],
    "plan_at":      <the plan call's seq>
  }
}

"narrative": what happened in the span, for the agent that resumes from it: the goal, what was tried, what worked and what did not and why, decisions, what is still in progress. Plain sentences; it must fit the token budget given and must not contradict the claims.

"claims": the required claims given with the span, copied exactly: every id, seq, key, kind, state, "by" and "withdrawn". Leave none out and add none. A summary that drops a rejected or failed approach, a failed call, an artifact, a constraint, a user's request, an open plan item or a call still open is refused, and so is a claim the span does not imply. The texts of claims (reasons, constraint wording) are taken from the raw log, not from your answer. Lists may be empty or left out when nothing is required.`

// messages returns the chat messages for in: the system prompt, and the
// span with its budget and required claims.
func messages(in *compaction.Input, maxSpan int) []chatMessage {
	return []chatMessage{{Role: "system", Content: systemPrompt}, {Role: "user", Content: userPrompt(in, maxSpan)}}
}

// userPrompt renders the span, its budget and required claims, and on a
// retry what the previous summary lacked.
func userPrompt(in *compaction.Input, maxSpan int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Session: %s\n", in.Session)
	if len(in.Children) > 0 {
		fmt.Fprintf(&b, "Make an %s digest of seq %d..%d from the %d %s summaries below.\n",
			in.Depth, in.From, in.To, len(in.Children), in.Children[0].Depth)
	} else {
		fmt.Fprintf(&b, "Make an %s summary of the raw events seq %d..%d below.\n", in.Depth, in.From, in.To)
	}
	if in.Budget > 0 {
		fmt.Fprintf(&b, "Budget: the narrative must fit in %d tokens (at most %d characters).\n", in.Budget, 4*in.Budget)
	}

	if len(in.Missing) > 0 {
		fmt.Fprintf(&b, "\nA previous summary of this span (attempt %d) was REFUSED by the store. It lacked or got wrong:\n", in.Attempt)
		for _, f := range in.Missing {
			fmt.Fprintf(&b, "- %s", f)
			if f.Detail != "" {
				fmt.Fprintf(&b, " (%s)", f.Detail)
			}
			b.WriteByte('\n')
		}
		b.WriteString("Put every one of these in \"claims\" exactly as the required claims below say.\n")
	}

	req := in.Required.Claims()
	js, err := json.MarshalIndent(req, "", "  ")
	if err != nil {
		// Only a claim with an invalid kind fails to encode: the store never
		// plans one. Say so rather than send a prompt without the claims.
		js = []byte(fmt.Sprintf("%q", "required claims could not be encoded: "+err.Error()))
	}
	fmt.Fprintf(&b, "\nRequired claims (%d), to copy into \"claims\" exactly:\n```json\n%s\n```\n", req.Count(), js)

	var lines []string
	if len(in.Children) > 0 {
		b.WriteString("\nSummaries to fold, in order:\n")
		for i := range in.Children {
			lines = append(lines, childText(&in.Children[i]))
		}
	} else {
		b.WriteString("\nEvents, one per line: [seq tTURN] kind, id, (name), key=, by=, failed: text\n")
		for i := range in.Events {
			lines = append(lines, eventLine(&in.Events[i]))
		}
	}
	writeCapped(&b, lines, maxSpan)
	return b.String()
}

// eventLine renders one event on one line.
func eventLine(e *tier.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%d t%d] %s", e.Seq, e.Turn, e.Kind)
	if e.ID != "" {
		b.WriteString(" " + oneLine(e.ID, 200))
	}
	if e.Name != "" {
		b.WriteString(" (" + oneLine(e.Name, 200) + ")")
	}
	if e.Key != "" {
		b.WriteString(" key=" + oneLine(e.Key, 200))
	}
	if e.By != "" {
		b.WriteString(" by=" + oneLine(e.By, 200))
	}
	if e.Failed {
		b.WriteString(" failed")
	}
	if e.Text != "" {
		b.WriteString(": " + oneLine(e.Text, maxEventText))
	}
	return b.String()
}

// childText renders a child node: its heading and its narrative.
func childText(n *tier.Node) string {
	text := n.Narrative
	if len(text) > maxChildNarrative {
		text = cut(text, maxChildNarrative) + " …"
	}
	return fmt.Sprintf("[%s summary %d, seq %d..%d]\n%s", n.Depth, n.ID, n.From, n.To, strings.TrimSpace(text))
}

// writeCapped writes lines, leaving out lines in the middle when they
// would take more than max bytes, and says how many.
func writeCapped(b *strings.Builder, lines []string, max int) {
	total := 0
	for _, l := range lines {
		total += len(l) + 1
	}
	if max <= 0 || total <= max {
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
		return
	}
	head, size := 0, 0
	for head < len(lines) && size+len(lines[head])+1 <= max/2 {
		size += len(lines[head]) + 1
		head++
	}
	tail, size := len(lines), 0
	for tail > head && size+len(lines[tail-1])+1 <= max/2 {
		size += len(lines[tail-1]) + 1
		tail--
	}
	for _, l := range lines[:head] {
		b.WriteString(l + "\n")
	}
	fmt.Fprintf(b, "… %d of %d entries left out here for size; the required claims above cover them …\n", tail-head, len(lines))
	for _, l := range lines[tail:] {
		b.WriteString(l + "\n")
	}
}

// retryNote is added to the prompt after an unusable answer.
func retryNote(err error) chatMessage {
	return chatMessage{Role: "user", Content: fmt.Sprintf(
		"Your previous answer could not be used: %v\nAnswer again with only the JSON object described above.", err)}
}

// oneLine returns s with its whitespace runs collapsed to single spaces,
// cut to at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = cut(s, n) + "…"
	}
	return s
}

// cut returns s cut to at most n bytes, at a rune boundary.
func cut(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
