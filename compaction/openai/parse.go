package openai

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/tier"
)

// maxCandidates bounds the places in the content where a JSON object is
// tried.
const maxCandidates = 64

// chatResponse is the part of a chat completion that is read.
type chatResponse struct {
	Choices []struct {
		Message struct {
			Content json.RawMessage `json:"content"`
			Refusal string          `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"`
}

// outputErr returns an *OutputError with a stack.
func outputErr(reason OutputReason, excerptOf, format string, args ...any) error {
	e := &OutputError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
	if excerptOf != "" {
		e.Excerpt = excerpt(excerptOf, 120)
	}
	return errors.WithStack(e)
}

// parseCompletion returns the content of the first choice of a chat
// completion body.
func parseCompletion(data []byte) (string, error) {
	var r chatResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return "", outputErr(ReasonBadResponse, string(data), "the body is not a chat completion: %v", err)
	}
	if len(r.Error) > 0 && string(r.Error) != "null" {
		msg, _, _ := errorMessage(data)
		return "", outputErr(ReasonBadResponse, "", "status 200 with an error: %s", msg)
	}
	if len(r.Choices) == 0 {
		return "", outputErr(ReasonNoChoices, string(data), "the completion has no choices")
	}
	c := &r.Choices[0]
	content, err := contentText(c.Message.Content)
	if err != nil {
		return "", outputErr(ReasonBadResponse, string(c.Message.Content), "message.content: %v", err)
	}
	switch c.FinishReason {
	case "length":
		return "", outputErr(ReasonTruncated, content,
			`finish_reason "length": the answer hit the token limit (Config.MaxTokens or the server's context size)`)
	case "content_filter":
		return "", outputErr(ReasonFiltered, content, `finish_reason "content_filter"`)
	}
	if strings.TrimSpace(content) == "" {
		if c.Message.Refusal != "" {
			return "", outputErr(ReasonEmpty, "", "the model refused: %s", excerpt(c.Message.Refusal, 200))
		}
		return "", outputErr(ReasonEmpty, "", "the message has no content")
	}
	return content, nil
}

// contentText returns message.content: a string, null, or an array of parts
// whose "text" fields are joined.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("neither a string nor an array of text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// wireClaims is the "claims" object of an answer: tier.Claims with kinds
// and states as names, read leniently (case, spaces) but with strict types.
type wireClaims struct {
	Resolved   []wireInvocation `json:"resolved"`
	Failures   []wireInvocation `json:"failures"`
	Unresolved []struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
		Name string `json:"name"`
		Seq  uint64 `json:"seq"`
	} `json:"unresolved"`
	Dispositions []struct {
		Key    string `json:"key"`
		State  string `json:"state"`
		Reason string `json:"reason"`
		By     string `json:"by"`
		Seq    uint64 `json:"seq"`
	} `json:"dispositions"`
	Constraints []struct {
		Key       string `json:"key"`
		Text      string `json:"text"`
		Withdrawn bool   `json:"withdrawn"`
		Seq       uint64 `json:"seq"`
	} `json:"constraints"`
	Artifacts []struct {
		Key  string `json:"key"`
		Text string `json:"text"`
		Seq  uint64 `json:"seq"`
	} `json:"artifacts"`
	Requests []struct {
		Seq  uint64 `json:"seq"`
		Text string `json:"text"`
	} `json:"requests"`
	Plan []struct {
		Key    string `json:"key"`
		Status string `json:"status"`
		Index  int    `json:"index"`
		Seq    uint64 `json:"seq"`
	} `json:"plan"`
	PlanAt uint64 `json:"plan_at"`
}

// parseSummary reads the model's content as a summary of in: one JSON
// object {"narrative": string, "claims": {...}}, found as the whole content,
// in a ``` fence, or after leading prose. Claims are checked for types and
// kind names only: whether they are the right claims is the store's call.
func parseSummary(content string, in *compaction.Input) (compaction.Output, error) {
	obj, err := extractObject(content)
	if err != nil {
		return compaction.Output{}, outputErr(ReasonInvalidJSON, content, "no JSON object in the answer: %v", err)
	}
	raw, ok := obj["narrative"]
	if !ok || string(raw) == "null" {
		return compaction.Output{}, outputErr(ReasonNoNarrative, content, `the object has no "narrative"`)
	}
	var narrative string
	if err := json.Unmarshal(raw, &narrative); err != nil {
		return compaction.Output{}, outputErr(ReasonWrongType, content, `"narrative" is %s, want a string`, jsonType(raw))
	}
	narrative = strings.TrimSpace(narrative)
	if narrative == "" {
		return compaction.Output{}, outputErr(ReasonNoNarrative, content, `"narrative" is blank`)
	}
	claims, err := parseClaims(obj["claims"])
	if err != nil {
		return compaction.Output{}, errors.WithStack(&OutputError{Reason: ReasonWrongType, Detail: err.Error(), Excerpt: excerpt(content, 120)})
	}
	if in.Budget > 0 {
		if n := tier.EstimateTokens(narrative); n > in.Budget {
			return compaction.Output{}, outputErr(ReasonOverBudget, "",
				"the narrative is about %d tokens (%d bytes), the budget is %d", n, len(narrative), in.Budget)
		}
	}
	return compaction.Output{Narrative: narrative, Claims: claims}, nil
}

// wireInvocation is a resolved or failed call in an answer: an id, or an
// object with the id and the seq that opened it (the form the required
// claims are given in).
type wireInvocation struct {
	ID  string
	Seq uint64
}

// UnmarshalJSON reads "c1" or {"id": "c1", "seq": 5, ...}; other fields
// (name, reason) are the raw log's and are not read.
func (w *wireInvocation) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &w.ID); err == nil {
		return nil
	}
	var o struct {
		ID  string `json:"id"`
		Seq uint64 `json:"seq"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	w.ID, w.Seq = o.ID, o.Seq
	return nil
}

// parseClaims decodes the "claims" value; absent or null is no claims.
func parseClaims(raw json.RawMessage) (tier.Claims, error) {
	var c tier.Claims
	if len(raw) == 0 || string(raw) == "null" {
		return c, nil
	}
	var w wireClaims
	if err := json.Unmarshal(raw, &w); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return c, errors.Newf(`"claims.%s" is a JSON %s, want %s`, te.Field, te.Value, goToJSON(te.Type.String()))
		}
		return c, errors.Newf(`"claims" is %s, want an object: %v`, jsonType(raw), err)
	}
	for _, r := range w.Resolved {
		c.Resolved = append(c.Resolved, tier.Resolution{ID: r.ID, Seq: r.Seq})
	}
	for _, r := range w.Failures {
		c.Failures = append(c.Failures, tier.Resolution{ID: r.ID, Seq: r.Seq, Failed: true})
	}
	for i, o := range w.Unresolved {
		k, err := tier.ParseKind(strings.ToLower(strings.TrimSpace(o.Kind)))
		if err != nil || !k.Opens() {
			return c, errors.Newf(`"claims.unresolved[%d].kind" is %q, want "tool_call" or "open"`, i, o.Kind)
		}
		c.Unresolved = append(c.Unresolved, tier.Open{ID: o.ID, Kind: k, Name: o.Name, Seq: o.Seq})
	}
	for i, d := range w.Dispositions {
		state := strings.ToLower(strings.TrimSpace(d.State))
		k, err := tier.ParseKind(state)
		if state == tier.StateName(tier.StateSucceeded) {
			k, err = tier.StateSucceeded, nil
		}
		if err != nil || !k.IsDisposition() && k != tier.StateSucceeded {
			return c, errors.Newf(`"claims.dispositions[%d].state" is %q, want "rejected", "failed", "superseded" or "succeeded"`, i, d.State)
		}
		c.Dispositions = append(c.Dispositions, tier.Disposition{Key: d.Key, State: k, Reason: d.Reason, By: d.By, Seq: d.Seq})
	}
	for _, x := range w.Constraints {
		c.Constraints = append(c.Constraints, tier.Constraint{Key: x.Key, Text: x.Text, Withdrawn: x.Withdrawn, Seq: x.Seq})
	}
	for _, a := range w.Artifacts {
		c.Artifacts = append(c.Artifacts, tier.Artifact{Key: a.Key, Text: a.Text, Seq: a.Seq})
	}
	for _, r := range w.Requests {
		c.Requests = append(c.Requests, tier.Request{Seq: r.Seq, Text: r.Text})
	}
	for _, p := range w.Plan {
		c.Plan = append(c.Plan, tier.PlanItem{Key: p.Key, Status: p.Status, Index: p.Index, Seq: p.Seq})
	}
	c.PlanAt = w.PlanAt
	c.Normalize()
	return c, nil
}

// extractObject finds the JSON object of an answer: the whole content, the
// inside of a ``` fence, or the first object after leading prose (a model's
// preamble, a <think> block). An object with a "narrative" key is preferred;
// else the first object found is returned; else the first parse error.
func extractObject(content string) (map[string]json.RawMessage, error) {
	s := strings.TrimSpace(content)
	cands := []string{s}
	for rest := s; len(cands) < maxCandidates; {
		i := strings.Index(rest, "```")
		if i < 0 {
			break
		}
		rest = rest[i+3:]
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			break
		}
		// The fence's info string ("json") ends at the line end.
		body := rest[nl+1:]
		end := strings.Index(body, "```")
		if end < 0 {
			cands = append(cands, body)
			break
		}
		cands = append(cands, body[:end])
		rest = body[end+3:]
	}
	for off := 0; len(cands) < maxCandidates; {
		i := strings.IndexByte(s[off:], '{')
		if i < 0 {
			break
		}
		cands = append(cands, s[off+i:])
		off += i + 1
	}
	// An object with a "narrative" wins. Else what the first candidate
	// that opens an object gives: an object without a narrative, or why it
	// does not parse (a truncated answer holds complete inner objects).
	var first map[string]json.RawMessage
	var firstErr error
	seen := false
	for _, c := range cands {
		c = strings.TrimSpace(c)
		if !strings.HasPrefix(c, "{") {
			continue
		}
		var m map[string]json.RawMessage
		err := json.NewDecoder(strings.NewReader(c)).Decode(&m)
		if err == nil {
			if _, ok := m["narrative"]; ok {
				return m, nil
			}
		}
		if !seen {
			seen, first, firstErr = true, m, err
		}
	}
	if !seen {
		return nil, errors.New("no '{' in the content")
	}
	if firstErr != nil {
		if errors.Is(firstErr, io.ErrUnexpectedEOF) {
			firstErr = errors.Wrap(firstErr, "cut short")
		}
		return nil, firstErr
	}
	return first, nil
}

// jsonType names the JSON type of raw.
func jsonType(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	switch {
	case s == "":
		return "absent"
	case s == "null":
		return "null"
	case s[0] == '"':
		return "a string"
	case s[0] == '{':
		return "an object"
	case s[0] == '[':
		return "an array"
	case s == "true" || s == "false":
		return "a boolean"
	}
	return "a number"
}

// goToJSON names the JSON type a Go type decodes from.
func goToJSON(t string) string {
	switch {
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	case strings.HasPrefix(t, "uint") || strings.HasPrefix(t, "int") || strings.HasPrefix(t, "float"):
		return "a number"
	}
	return "an object"
}
