package checkpoint_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/tier"
)

// stateOf replays events (seq 1, 2, … in order) and returns the state at
// the last.
func stateOf(t *testing.T, events []tier.Event) checkpoint.State {
	t.Helper()
	l := tier.NewLedger()
	b := tier.NewRequiredBuilder(nil)
	for i := range events {
		e := events[i]
		e.Seq = uint64(i + 1)
		if err := l.Apply(&e); err != nil {
			t.Fatal(err)
		}
		if err := b.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	r := b.Required()
	return checkpoint.StateOf(&r)
}

func bashCall(id, cmd string) tier.Event {
	return tier.Event{Kind: tier.KindToolCall, ID: id, Name: "Bash", Text: fmt.Sprintf(`{"command":%q}`, cmd)}
}

// TestFitState_PriorityAndLeftOut: with a budget too small for every
// fact, FitState keeps the task and the newest request, then the classes
// in priority order — a standing failure before an open call before a
// plan item before a rejection before an artifact — and counts every fact
// it leaves out, by class, in the text and in LeftOut.
func TestFitState_PriorityAndLeftOut(t *testing.T) {
	long := strings.Repeat("x", 200)
	ev := []tier.Event{{Kind: tier.KindUser, Text: "TASK: fix the build"}}
	for i := range 20 {
		ev = append(ev, tier.Event{Kind: tier.KindArtifact, Key: fmt.Sprintf("artifact-%02d.go", i), Text: long})
	}
	for i := range 20 {
		ev = append(ev, tier.Event{Kind: tier.KindRejected, Key: fmt.Sprintf("approach-%02d", i), Text: long})
	}
	ev = append(ev, tier.Event{Kind: tier.KindToolCall, ID: "plan", Name: "TodoWrite",
		Text: `{"todos":[{"content":"write the fix","status":"in_progress"},{"content":"run the tests","status":"pending"}]}`},
		tier.Event{Kind: tier.KindToolResult, ID: "plan"})
	for i := range 5 {
		id := fmt.Sprintf("c%d", i)
		ev = append(ev, bashCall(id, fmt.Sprintf("tool%d build", i)),
			tier.Event{Kind: tier.KindToolResult, ID: id, Failed: true, Text: long})
	}
	ev = append(ev, bashCall("open1", "sleep 100"), tier.Event{Kind: tier.KindUser, Text: "NEWEST: and keep the API"})
	s := stateOf(t, ev)

	f := checkpoint.FitState("# head\n", &s, checkpoint.MinStateBudget)
	if f.Tokens > checkpoint.MinStateBudget {
		t.Errorf("%d tokens, budget %d", f.Tokens, checkpoint.MinStateBudget)
	}
	for _, want := range []string{"TASK: fix the build", "NEWEST: and keep the API", "FAILED `tool4 build`"} {
		if !strings.Contains(f.Text, want) {
			t.Errorf("the fitted state lacks %q:\n%s", want, f.Text)
		}
	}
	// Priority: every standing failure, the open call and the plan fit
	// before any artifact does.
	for _, want := range []string{"FAILED `tool0 build`", "UNRESOLVED call open1", "[in_progress] write the fix", "[pending] run the tests"} {
		if !strings.Contains(f.Text, want) {
			t.Errorf("the fitted state lacks %q:\n%s", want, f.Text)
		}
	}
	if strings.Contains(f.Text, "- artifact: artifact-") {
		t.Errorf("an artifact shown while rejections are left out:\n%s", f.Text)
	}
	left := map[string]int{}
	sum := 0
	for _, l := range f.LeftOut {
		left[l.Class] = l.Count
		sum += l.Count
	}
	if left["artifact"] != 20 || left["item"] == 0 || left["standing failure"] != 0 {
		t.Errorf("left out: %+v", f.LeftOut)
	}
	if f.Shown+sum != f.Facts || f.Facts != 2+5+1+2+20+20 {
		t.Errorf("shown %d + left out %d != facts %d", f.Shown, sum, f.Facts)
	}
	if !strings.Contains(f.Text, "… and 20 more artifacts not shown") ||
		!strings.Contains(f.Text, fmt.Sprintf("… and %d more items not shown", left["item"])) {
		t.Errorf("the text does not count what it leaves out:\n%s", f.Text)
	}
	// A budget for everything leaves nothing out.
	if all := checkpoint.FitState("# head\n", &s, 100_000); all.Shown != all.Facts || len(all.LeftOut) != 0 {
		t.Errorf("budget 100000: shown %d of %d, left out %+v", all.Shown, all.Facts, all.LeftOut)
	}
}

// TestFitState_TaskAndNewestAlways: however many facts of higher class
// there are, the task and the newest request are in the smallest budget.
func TestFitState_TaskAndNewestAlways(t *testing.T) {
	long := strings.Repeat("y", 2000)
	ev := []tier.Event{{Kind: tier.KindUser, Text: "the task"}}
	for i := range 50 {
		id := fmt.Sprintf("c%d", i)
		ev = append(ev, bashCall(id, fmt.Sprintf("cmd%d", i)), tier.Event{Kind: tier.KindToolResult, ID: id, Failed: true, Text: long})
	}
	ev = append(ev, tier.Event{Kind: tier.KindUser, Text: "the newest request"})
	s := stateOf(t, ev)
	f := checkpoint.FitState("", &s, 1)
	if !strings.Contains(f.Text, "the task") || !strings.Contains(f.Text, "the newest request") {
		t.Errorf("the task or the newest request is missing:\n%s", f.Text)
	}
	if f.Tokens > checkpoint.MinStateBudget || len(f.LeftOut) == 0 || f.LeftOut[0].Class != "standing failure" {
		t.Errorf("%d tokens, left out %+v", f.Tokens, f.LeftOut)
	}
}

// TestFitState_RejectionOnce: a tool use the user rejected — a failed
// result, then the rejected event at the next seq — is shown once, as a
// rejection naming the command of its call's input, not also as a
// standing failure; a failure not followed by a rejection stands, and a
// rejection after another event is a disposition of its own.
func TestFitState_RejectionOnce(t *testing.T) {
	s := stateOf(t, []tier.Event{
		{Kind: tier.KindUser, Text: "deploy it"},
		bashCall("c1", "git push --force"),
		{Kind: tier.KindToolResult, ID: "c1", Failed: true, Text: "The user doesn't want to proceed with this tool use."},
		{Kind: tier.KindRejected, Key: "tool/Bash:git push --force", Text: "do not force-push"},
		bashCall("c2", "make deploy"),
		{Kind: tier.KindToolResult, ID: "c2", Failed: true, Text: "make: *** no rule"},
		{Kind: tier.KindUser, Text: "not blue-green"},
		{Kind: tier.KindRejected, Key: "approach/blue-green", Text: "too costly"},
	})
	if len(s.Rejected) != 1 || s.Rejected[0] != 3 {
		t.Fatalf("rejected %v, want [3]", s.Rejected)
	}
	text := checkpoint.FitState("", &s, 0).Text
	for _, want := range []string{
		"- rejected: `git push --force` (Bash), call c1 at seq 3 — do not force-push",
		"FAILED `make deploy` (Bash)",
		"- rejected: approach/blue-green — too costly",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "FAILED `git push") || strings.Count(text, "git push --force") != 1 {
		t.Errorf("the rejected push is shown more than once:\n%s", text)
	}
}
