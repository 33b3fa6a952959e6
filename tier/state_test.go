package tier_test

import (
	"reflect"
	"testing"

	"github.com/strata-go/strata/tier"
)

func TestPlanOf_ThreeClients(t *testing.T) {
	cases := []struct {
		name, args string
		want       []tier.PlanItem
	}{
		{"TodoWrite", `{"todos":[{"content":"write the test","status":"completed","activeForm":"x"},{"content":"fix the parser","status":"in_progress"},{"content":"update docs","status":"pending"}]}`,
			[]tier.PlanItem{{Key: "fix the parser", Status: "in_progress", Index: 1, Seq: 7}, {Key: "update docs", Status: "pending", Index: 2, Seq: 7}}},
		{"update_plan", `"{\"plan\":[{\"step\":\"inspect\",\"status\":\"completed\"},{\"step\":\"implement\",\"status\":\"pending\"}]}"`,
			[]tier.PlanItem{{Key: "implement", Status: "pending", Index: 1, Seq: 7}}},
		{"write_todos", `{"todos":[{"description":"a","status":"cancelled"},{"description":"b","status":"in_progress"}]}`,
			[]tier.PlanItem{{Key: "b", Status: "in_progress", Index: 1, Seq: 7}}},
		{"TodoWrite", `{"todos":[]}`, nil},
	}
	for _, c := range cases {
		got, ok := tier.PlanOf(&tier.Event{Seq: 7, Kind: tier.KindToolCall, ID: "c", Name: c.name, Text: c.args})
		if !ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s: %+v %v, want %+v", c.name, c.args, got, ok, c.want)
		}
	}
	for _, e := range []tier.Event{
		{Kind: tier.KindToolCall, Name: "Bash", Text: `{"todos":[]}`},             // not a plan tool
		{Kind: tier.KindToolCall, Name: "TodoWrite", Text: `not json`},            // no structured input
		{Kind: tier.KindToolResult, Name: "TodoWrite", Text: `{"todos":[]}`},      // a result, not a call
		{Kind: tier.KindToolCall, Name: "TodoWrite", Text: `{"items":[{"a":1}]}`}, // no list
	} {
		if items, ok := tier.PlanOf(&e); ok {
			t.Errorf("%+v: a plan call %+v", e, items)
		}
	}
}

func TestCallTarget_FieldPerTool(t *testing.T) {
	cases := []struct{ name, args, want string }{
		{"Bash", `{"command":"git  push\n origin","description":"push"}`, "git push origin"},
		{"exec_command", `{"cmd":["bash","-lc","go test ./..."]}`, "bash -lc go test ./..."},
		{"shell", `"{\"command\":[\"ls\",\"-la\"]}"`, "ls -la"},
		{"Edit", `{"file_path":"/src/a.go","old_string":"x","new_string":"y"}`, "/src/a.go"},
		{"MultiEdit", `{"file_path":"b.go","edits":[]}`, "b.go"},
		{"Write", `{"file_path":"c.go","content":"package c"}`, "c.go"},
		{"apply_patch", `{"input":"*** Begin Patch\n*** Update File: x.go\n@@\n*** Add File: y.go\n*** End Patch"}`, "x.go, y.go"},
		{"apply_patch", "*** Begin Patch\n*** Update File: raw.go\n*** End Patch", "raw.go"},
		{"Read", `{"file_path":"r.go"}`, ""},
		{"Bash", `not json`, ""},
	}
	for _, c := range cases {
		if got := tier.CallTarget(c.name, c.args); got != c.want {
			t.Errorf("CallTarget(%s, %s) = %q, want %q", c.name, c.args, got, c.want)
		}
	}
}

func TestSameTarget_Rule(t *testing.T) {
	same := [][2]string{
		{"git push", "git push --set-upstream origin main"},
		{"go test ./a", "go test -run X ./b"},
		{"cd /repo && make test", "make test"},
		{"GOFLAGS=-race go test ./...", "go test ./x"},
		{"/usr/bin/git status", "git status -s"},
	}
	for _, p := range same {
		if a, b := tier.SameTarget("Bash", p[0]), tier.SameTarget("Bash", p[1]); a != b || a == "" {
			t.Errorf("%q → %q, %q → %q: want one target", p[0], a, p[1], b)
		}
	}
	apart := [][2]string{{"npm run build", "npm run lint"}, {"git push", "git pull"}, {"python3 a.py", "python3 b.py"}}
	for _, p := range apart {
		if a, b := tier.SameTarget("Bash", p[0]), tier.SameTarget("Bash", p[1]); a == b {
			t.Errorf("%q and %q: both %q, want two targets", p[0], p[1], a)
		}
	}
	if a, b := tier.SameTarget("Edit", "x.go"), tier.SameTarget("Write", "x.go"); a != b || a != "file x.go" {
		t.Errorf("Edit and Write of x.go: %q, %q", a, b)
	}
	if k := tier.SameTarget("Read", ""); k != "" {
		t.Errorf("no target: %q", k)
	}
}

// TestRequired_FailureFixedBySameTarget: a failure is fixed by a later
// success on its target, not by one on another target, and not by a
// success before it.
func TestRequired_FailureFixedBySameTarget(t *testing.T) {
	bash := func(id, cmd string) tier.Event {
		return tier.Event{Kind: tier.KindToolCall, ID: id, Name: "Bash", Text: `{"command":"` + cmd + `"}`}
	}
	res := func(id string, failed bool) tier.Event {
		return tier.Event{Kind: tier.KindToolResult, ID: id, Failed: failed, Text: "out " + id}
	}
	evs := []tier.Event{
		{Kind: tier.KindUser, Text: "push my branch"},
		bash("a", "git push"), res("a", true), // 2, 3: fixed at 5
		bash("b", "git push --set-upstream origin x"), res("b", false), // 4, 5
		bash("c", "go test ./..."), res("c", false), // 6, 7
		bash("d", "go test ./..."), res("d", true), // 8, 9: stands (the success was before)
		bash("e", "ls"), res("e", false), // 10, 11
		{Kind: tier.KindUser, Text: "and run the tests"}, // 12
	}
	for i := range evs {
		evs[i].Seq = uint64(i + 1)
	}
	_, all := replay(t, evs)
	req, err := tier.ComputeRequired(nil, all)
	if err != nil {
		t.Fatal(err)
	}
	fixed := map[string]uint64{}
	for _, f := range req.Failures {
		fixed[f.ID] = f.Fixed
		if f.Target == "" {
			t.Errorf("failure %s names no target", f.ID)
		}
	}
	if want := map[string]uint64{"a": 5, "d": 0}; !reflect.DeepEqual(fixed, want) {
		t.Errorf("fixed = %v, want %v", fixed, want)
	}
	if want := []tier.Request{{Seq: 1, Text: "push my branch"}, {Seq: 12, Text: "and run the tests"}}; !reflect.DeepEqual(req.Requests, want) {
		t.Errorf("requests = %+v, want %+v", req.Requests, want)
	}
}
