package tier_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/tier"
)

func TestKind_NamesRoundTrip(t *testing.T) {
	ks := tier.Kinds()
	if len(ks) != 13 {
		t.Fatalf("Kinds() = %d kinds, want 13", len(ks))
	}
	seen := map[string]bool{}
	for i, k := range ks {
		if int(k) != i+1 {
			t.Errorf("Kinds()[%d] = %d: kinds are stored on disk and must stay numbered 1..13", i, k)
		}
		if !k.Valid() {
			t.Errorf("%v: not Valid", k)
		}
		name := k.String()
		if seen[name] {
			t.Errorf("kind name %q used twice", name)
		}
		seen[name] = true
		got, err := tier.ParseKind(name)
		if err != nil || got != k {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", name, got, err, k)
		}
		b, err := json.Marshal(k)
		if err != nil || string(b) != `"`+name+`"` {
			t.Errorf("json.Marshal(%v) = %s, %v", k, b, err)
		}
		var back tier.Kind
		if err := json.Unmarshal(b, &back); err != nil || back != k {
			t.Errorf("json.Unmarshal(%s) = %v, %v", b, back, err)
		}
	}
	for _, bad := range []tier.Kind{0, 14, 255} {
		if bad.Valid() {
			t.Errorf("Kind(%d).Valid() = true", bad)
		}
		if _, err := json.Marshal(bad); err == nil {
			t.Errorf("json.Marshal(Kind(%d)) succeeded", bad)
		}
		if !strings.HasPrefix(bad.String(), "kind(") {
			t.Errorf("Kind(%d).String() = %q", bad, bad.String())
		}
	}
	for _, name := range []string{"", "User", "tool-call", "message"} {
		if _, err := tier.ParseKind(name); !errors.Is(err, tier.ErrUnknownKind) {
			t.Errorf("ParseKind(%q) = %v, want ErrUnknownKind", name, err)
		}
	}
	var k tier.Kind
	if err := json.Unmarshal([]byte(`5`), &k); err == nil {
		t.Errorf("json.Unmarshal(5) into Kind succeeded")
	}
}

func TestKind_Classes(t *testing.T) {
	for _, k := range tier.Kinds() {
		opens := k == tier.KindToolCall || k == tier.KindOpen
		resolves := k == tier.KindToolResult || k == tier.KindClose
		needsKey := false
		switch k {
		case tier.KindConstraint, tier.KindWithdrawn, tier.KindRejected, tier.KindFailed, tier.KindSuperseded, tier.KindArtifact:
			needsKey = true
		}
		disp := k == tier.KindRejected || k == tier.KindFailed || k == tier.KindSuperseded
		if k.Opens() != opens || k.Resolves() != resolves || k.NeedsID() != (opens || resolves) ||
			k.NeedsKey() != needsKey || k.IsDisposition() != disp {
			t.Errorf("%v: opens %v resolves %v needsID %v needsKey %v disposition %v", k,
				k.Opens(), k.Resolves(), k.NeedsID(), k.NeedsKey(), k.IsDisposition())
		}
	}
}

// validEvent returns a valid event of kind k.
func validEvent(k tier.Kind) tier.Event {
	e := tier.Event{Kind: k, Text: "text of " + k.String()}
	switch {
	case k.NeedsID():
		e.ID = "id-1"
	case k.NeedsKey():
		e.Key = "key/1"
	}
	if k == tier.KindSuperseded {
		e.By = "key/2"
	}
	return e
}

func TestEvent_Check_Valid(t *testing.T) {
	for _, k := range tier.Kinds() {
		e := validEvent(k)
		if err := e.Check(tier.Limits{}); err != nil {
			t.Errorf("%v: %v", k, err)
		}
		if k.Resolves() {
			e.Failed = true
			if err := e.Check(tier.Limits{}); err != nil {
				t.Errorf("%v failed: %v", k, err)
			}
		}
	}
	// Text may hold control characters (it is content); only identifiers may not.
	e := tier.Event{Kind: tier.KindAssistant, Text: "line 1\nline 2\ttab\x00nul"}
	if err := e.Check(tier.Limits{}); err != nil {
		t.Errorf("control characters in text: %v", err)
	}
	// A superseded event may leave out what replaced it (the real sessions'
	// undone commits name none).
	e = tier.Event{Kind: tier.KindSuperseded, Key: "commit:8742503", Text: "/undo"}
	if err := e.Check(tier.Limits{}); err != nil {
		t.Errorf("superseded without by: %v", err)
	}
	// The largest seq and turn.
	e = tier.Event{Kind: tier.KindUser, Seq: tier.MaxSeq, Turn: tier.MaxTurn}
	if err := e.Check(tier.Limits{}); err != nil {
		t.Errorf("seq MaxSeq, turn MaxTurn: %v", err)
	}
	// Exactly at the limits is fine.
	lim := tier.Limits{MaxEventBytes: 20, MaxIDBytes: 5}
	e = tier.Event{Kind: tier.KindToolCall, ID: "12345", Name: "abcde", Text: strings.Repeat("x", 10)}
	if err := e.Check(lim); err != nil {
		t.Errorf("at the limits: %v", err)
	}
}

func TestEvent_Check_BadInput(t *testing.T) {
	small := tier.Limits{MaxEventBytes: 64, MaxIDBytes: 8}
	cases := []struct {
		name string
		e    tier.Event
		lim  tier.Limits
		want error
	}{
		{"zero kind", tier.Event{Text: "x"}, tier.Limits{}, tier.ErrUnknownKind},
		{"kind 14", tier.Event{Kind: 14}, tier.Limits{}, tier.ErrUnknownKind},
		{"kind 255", tier.Event{Kind: 255}, tier.Limits{}, tier.ErrUnknownKind},
		{"tool_call without id", tier.Event{Kind: tier.KindToolCall, Name: "bash"}, tier.Limits{}, tier.ErrMissingID},
		{"tool_result without id", tier.Event{Kind: tier.KindToolResult}, tier.Limits{}, tier.ErrMissingID},
		{"open without id", tier.Event{Kind: tier.KindOpen, Name: "file"}, tier.Limits{}, tier.ErrMissingID},
		{"close without id", tier.Event{Kind: tier.KindClose}, tier.Limits{}, tier.ErrMissingID},
		{"constraint without key", tier.Event{Kind: tier.KindConstraint, Text: "be nice"}, tier.Limits{}, tier.ErrMissingKey},
		{"withdrawn without key", tier.Event{Kind: tier.KindWithdrawn}, tier.Limits{}, tier.ErrMissingKey},
		{"rejected without key", tier.Event{Kind: tier.KindRejected}, tier.Limits{}, tier.ErrMissingKey},
		{"failed without key", tier.Event{Kind: tier.KindFailed}, tier.Limits{}, tier.ErrMissingKey},
		{"superseded without key", tier.Event{Kind: tier.KindSuperseded, By: "b"}, tier.Limits{}, tier.ErrMissingKey},
		{"artifact without key", tier.Event{Kind: tier.KindArtifact}, tier.Limits{}, tier.ErrMissingKey},
		{"invalid UTF-8 in text", tier.Event{Kind: tier.KindUser, Text: "ok \xff\xfe"}, tier.Limits{}, tier.ErrInvalidUTF8},
		{"invalid UTF-8 in id", tier.Event{Kind: tier.KindToolCall, ID: "c\xc3"}, tier.Limits{}, tier.ErrInvalidUTF8},
		{"invalid UTF-8 in key", tier.Event{Kind: tier.KindArtifact, Key: "\xed\xa0\x80"}, tier.Limits{}, tier.ErrInvalidUTF8},
		{"invalid UTF-8 in name", tier.Event{Kind: tier.KindToolCall, ID: "c", Name: "\x80"}, tier.Limits{}, tier.ErrInvalidUTF8},
		{"invalid UTF-8 in by", tier.Event{Kind: tier.KindSuperseded, Key: "k", By: "\xc0\xaf"}, tier.Limits{}, tier.ErrInvalidUTF8},
		{"newline in id", tier.Event{Kind: tier.KindToolCall, ID: "c\n1"}, tier.Limits{}, tier.ErrBadField},
		{"NUL in key", tier.Event{Kind: tier.KindConstraint, Key: "k\x00"}, tier.Limits{}, tier.ErrBadField},
		{"DEL in id", tier.Event{Kind: tier.KindOpen, ID: "\x7f"}, tier.Limits{}, tier.ErrBadField},
		{"C1 control in key", tier.Event{Kind: tier.KindArtifact, Key: "a\u0085b"}, tier.Limits{}, tier.ErrBadField},
		{"escape in name", tier.Event{Kind: tier.KindToolCall, ID: "c", Name: "\x1b[31m"}, tier.Limits{}, tier.ErrBadField},
		{"tab in by", tier.Event{Kind: tier.KindSuperseded, Key: "k", By: "a\tb"}, tier.Limits{}, tier.ErrBadField},
		{"newline in ref", tier.Event{Kind: tier.KindUser, Ref: "u\n1"}, tier.Limits{}, tier.ErrBadField},
		{"invalid UTF-8 in ref", tier.Event{Kind: tier.KindUser, Ref: "u\xff"}, tier.Limits{}, tier.ErrInvalidUTF8},
		{"ref over MaxIDBytes", tier.Event{Kind: tier.KindUser, Ref: "123456789"}, small, tier.ErrTooLarge},
		{"superseded by itself", tier.Event{Kind: tier.KindSuperseded, Key: "plan@v1", By: "plan@v1"}, tier.Limits{}, tier.ErrBadField},
		{"turn over MaxTurn", tier.Event{Kind: tier.KindUser, Turn: tier.MaxTurn + 1}, tier.Limits{}, tier.ErrBadField},
		{"turn 2^64-40", tier.Event{Kind: tier.KindAssistant, Turn: math.MaxUint64 - 39}, tier.Limits{}, tier.ErrBadField},
		{"by on rejected", tier.Event{Kind: tier.KindRejected, Key: "k", By: "other"}, tier.Limits{}, tier.ErrBadField},
		{"by on user", tier.Event{Kind: tier.KindUser, By: "other"}, tier.Limits{}, tier.ErrBadField},
		{"failed on tool_call", tier.Event{Kind: tier.KindToolCall, ID: "c", Failed: true}, tier.Limits{}, tier.ErrBadField},
		{"failed on failed", tier.Event{Kind: tier.KindFailed, Key: "k", Failed: true}, tier.Limits{}, tier.ErrBadField},
		{"failed on user", tier.Event{Kind: tier.KindUser, Failed: true}, tier.Limits{}, tier.ErrBadField},
		{"id over MaxIDBytes", tier.Event{Kind: tier.KindToolCall, ID: "123456789"}, small, tier.ErrTooLarge},
		{"key over MaxIDBytes", tier.Event{Kind: tier.KindArtifact, Key: "123456789"}, small, tier.ErrTooLarge},
		{"name over MaxIDBytes", tier.Event{Kind: tier.KindToolCall, ID: "c", Name: "123456789"}, small, tier.ErrTooLarge},
		{"by over MaxIDBytes", tier.Event{Kind: tier.KindSuperseded, Key: "k", By: "123456789"}, small, tier.ErrTooLarge},
		{"text over MaxEventBytes", tier.Event{Kind: tier.KindUser, Text: strings.Repeat("x", 65)}, small, tier.ErrTooLarge},
		{"fields together over MaxEventBytes", tier.Event{Kind: tier.KindToolCall, ID: "12345678", Name: "12345678", Text: strings.Repeat("x", 49)}, small, tier.ErrTooLarge},
		{"id over the default MaxIDBytes", tier.Event{Kind: tier.KindToolCall, ID: strings.Repeat("i", tier.DefaultMaxIDBytes+1)}, tier.Limits{}, tier.ErrTooLarge},
		{"text over the default MaxEventBytes", tier.Event{Kind: tier.KindUser, Text: strings.Repeat("t", tier.DefaultMaxEventBytes+1)}, tier.Limits{}, tier.ErrTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.e
			e.Seq = 42
			before := e
			err := e.Check(tc.lim)
			var ee *tier.EventError
			if !errors.As(err, &ee) {
				t.Fatalf("Check = %v (%T), want *tier.EventError", err, err)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("Check = %v, want errors.Is %v", err, tc.want)
			}
			if ee.Seq != 42 || !strings.Contains(err.Error(), "seq 42") {
				t.Errorf("error %q does not name seq 42 (Seq=%d)", err, ee.Seq)
			}
			if e != before {
				t.Errorf("Check modified the event: %+v", e)
			}
			// The sentinels are distinct from each other.
			for _, other := range allSentinels {
				if other != tc.want && errors.Is(err, other) {
					t.Errorf("error %v also matches %v", err, other)
				}
			}
		})
	}
}

// Seq and turn are bounded so that the store can count on from them: the
// error names the field.
func TestEvent_Check_Bounds(t *testing.T) {
	for _, tc := range []struct {
		field string
		e     tier.Event
	}{
		{"seq", tier.Event{Kind: tier.KindUser, Seq: tier.MaxSeq + 1}},
		{"seq", tier.Event{Kind: tier.KindUser, Seq: math.MaxUint64}},
		{"turn", tier.Event{Kind: tier.KindUser, Turn: tier.MaxTurn + 1}},
		{"turn", tier.Event{Kind: tier.KindToolCall, ID: "c", Turn: math.MaxUint64 - 39}},
		{"turn", tier.Event{Kind: tier.KindUser, Turn: math.MaxUint64}},
	} {
		err := tc.e.Check(tier.Limits{})
		var ee *tier.EventError
		if !errors.As(err, &ee) || !errors.Is(err, tier.ErrBadField) {
			t.Errorf("%s %d/%d: Check = %v, want an *EventError that Is ErrBadField", tc.field, tc.e.Seq, tc.e.Turn, err)
			continue
		}
		if !strings.HasPrefix(ee.Detail, tc.field+" ") || !strings.Contains(ee.Detail, "9007199254740992") {
			t.Errorf("detail %q does not name %s and the limit", ee.Detail, tc.field)
		}
	}
	if tier.MaxSeq != 1<<53 || tier.MaxTurn != 1<<53 {
		t.Errorf("MaxSeq %d, MaxTurn %d: the bounds are 2^53", uint64(tier.MaxSeq), uint64(tier.MaxTurn))
	}
}

// Whatever an EventError holds, its message quotes at most a clipped part
// of each value: a hostile kind, id, key or detail can be megabytes.
func TestEventError_Clipped(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	err := &tier.EventError{Seq: 1, Kind: big + "\n", ID: big, Key: big, Err: tier.ErrUnknownKind, Detail: big}
	msg := err.Error()
	if len(msg) > 2048 {
		t.Errorf("message is %d bytes", len(msg))
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("an unknown kind is printed unquoted: %.200q", msg)
	}
	for _, want := range []string{`kind "xxx`, `id "xxx`, `key "xxx`, "more bytes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %.300q lacks %q", msg, want)
		}
	}
	if ee := (&tier.EventError{Kind: "tool_call", Err: tier.ErrMissingID}); ee.Error() != "event kind tool_call: tier: missing id" {
		t.Errorf("a known kind: %q", ee.Error())
	}
}

var allSentinels = []error{
	tier.ErrUnknownKind, tier.ErrMissingID, tier.ErrMissingKey, tier.ErrNotOpen, tier.ErrWrongResource,
	tier.ErrAlreadyOpen, tier.ErrNotActive, tier.ErrSeqOrder, tier.ErrTurnOrder, tier.ErrInvalidUTF8,
	tier.ErrTooLarge, tier.ErrBadField, tier.ErrBadJSON,
}

func TestEventError_Format(t *testing.T) {
	err := error(&tier.EventError{Index: 3, Seq: 7, Kind: "tool_result", ID: "c1", Key: "k", Err: tier.ErrNotOpen, Detail: "why"})
	want := `event seq 7 kind tool_result id "c1" key "k": tier: id is not open (why)`
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if got := fmt.Sprintf("%v", err); got != want {
		t.Errorf("%%v = %q, want %q", got, want)
	}
	if got := fmt.Sprintf("%+v", err); !strings.Contains(got, "id is not open") {
		t.Errorf("%%+v = %q", got)
	}
	wrapped := errors.Wrap(err, "appending")
	var ee *tier.EventError
	if !errors.As(wrapped, &ee) || ee.Index != 3 || !errors.Is(wrapped, tier.ErrNotOpen) {
		t.Errorf("wrapped: As %v Index %d Is %v", ee != nil, ee.Index, errors.Is(wrapped, tier.ErrNotOpen))
	}
	// Package-prefixed sentinels: no two compare equal.
	for i, a := range allSentinels {
		if !strings.HasPrefix(a.Error(), "tier: ") {
			t.Errorf("sentinel %q is not prefixed with the package", a)
		}
		for _, b := range allSentinels[i+1:] {
			if errors.Is(a, b) {
				t.Errorf("%v is %v", a, b)
			}
		}
	}
}

func TestEstimateTokens(t *testing.T) {
	for s, want := range map[string]int{"": 0, "a": 1, "abcd": 1, "abcde": 2, strings.Repeat("x", 400): 100} {
		if got := tier.EstimateTokens(s); got != want {
			t.Errorf("EstimateTokens(%d bytes) = %d, want %d", len(s), got, want)
		}
	}
}

// An event read from a log matches the stored one when every field it gives
// is the stored one's; seq, turn and time count only where it gives them.
func TestEvent_Mismatch(t *testing.T) {
	stored := tier.Event{Seq: 4, Turn: 2, Time: 99, Kind: tier.KindToolResult, ID: "c1", Key: "k", Name: "bash",
		Failed: true, Text: "lock timeout", Ref: "r1"}
	same := stored
	same.Seq, same.Turn, same.Time = 0, 0, 0 // left out: the store assigned them
	if f := same.Mismatch(&stored); f != "" {
		t.Errorf("the same event without seq, turn and time: mismatch %q", f)
	}
	for _, tc := range []struct {
		field string
		edit  func(*tier.Event)
	}{
		{"seq", func(e *tier.Event) { e.Seq = 5 }},
		{"kind", func(e *tier.Event) { e.Kind = tier.KindClose }},
		{"turn", func(e *tier.Event) { e.Turn = 3 }},
		{"time", func(e *tier.Event) { e.Time = 100 }},
		{"id", func(e *tier.Event) { e.ID = "c2" }},
		{"key", func(e *tier.Event) { e.Key = "" }},
		{"name", func(e *tier.Event) { e.Name = "sh" }},
		{"ok", func(e *tier.Event) { e.Failed = false }},
		{"by", func(e *tier.Event) { e.By = "x" }},
		{"text", func(e *tier.Event) { e.Text = "lock timeout." }},
		{"ref", func(e *tier.Event) { e.Ref = "r2" }},
	} {
		e := stored
		tc.edit(&e)
		if f := e.Mismatch(&stored); f != tc.field {
			t.Errorf("%s changed: mismatch %q", tc.field, f)
		}
	}
}
