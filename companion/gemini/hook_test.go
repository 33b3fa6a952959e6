package gemini_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/companion/gemini"
	"github.com/strata-go/strata/companion/internal/hooktest"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// recorded is the chat Gemini CLI 0.61.0 recorded in the real-client run
// (TestGemini_RealClientCompresses): a task that ran a failing shell
// command and wrote a file, a follow-up that planned one item and during
// which Gemini CLI compressed the chat (a summary that mentions neither
// the failure nor the file), and a next prompt carrying strata's
// injection.
const recorded = "../../transcript/testdata/gemini/session-0.61.0.jsonl"

const (
	recordedSession = "243409cf-aabd-4802-a23b-e45a4794c12a"
	recordedCwd     = "/tmp/TestGemini_RealClientCompresses3664601746/002/project"
)

// chat writes the first n lines of the recorded chat to a file of the
// test's own, as Gemini CLI had written them when a hook ran, and
// returns the hook input of event naming it.
type chat struct {
	t     *testing.T
	lines [][]byte
	path  string
}

func newChat(t *testing.T) *chat {
	raw, err := os.ReadFile(recorded)
	if err != nil {
		t.Fatal(err)
	}
	return &chat{t: t, lines: bytes.SplitAfter(raw, []byte("\n")), path: filepath.Join(t.TempDir(), "session.jsonl")}
}

// upTo returns how many lines come before the first holding s.
func (c *chat) upTo(s string) int {
	for i, l := range c.lines {
		if bytes.Contains(l, []byte(s)) {
			return i
		}
	}
	c.t.Fatalf("the recorded chat holds no %q", s)
	return 0
}

func (c *chat) input(event string, n int) companion.Input {
	if err := os.WriteFile(c.path, bytes.Join(c.lines[:n], nil), 0o644); err != nil {
		c.t.Fatal(err)
	}
	in := companion.Input{SessionID: recordedSession, TranscriptPath: c.path, Cwd: recordedCwd, HookEventName: event}
	if event == gemini.EventPreCompress {
		in.Trigger = "auto"
	}
	return in
}

// The hooks as Gemini CLI ran them in the real run, on the chat as it
// was each time: nothing injected before the compression (PreCompress
// runs before every turn), the state at the boundary injected at the
// first BeforeAgent after it — the failed command, the file, the open
// plan item — and never again; the summary checked once, naming what it
// left out.
func TestHook_RecordedRun(t *testing.T) {
	c := newChat(t)
	db := dbtest.Open(t, store.Options{})
	h, err := companion.New(db, gemini.Agent{}, companion.Options{DB: "strata.db"})
	if err != nil {
		t.Fatal(err)
	}
	run := func(event string, n int) *companion.Result {
		t.Helper()
		return hooktest.Run(t, h, c.input(event, n))
	}
	task := c.upTo(`"TASK-A`) + 1
	compression := c.upTo("Summary of the conversation so far")
	next := c.upTo(`"NEXT: anything else to do?`)
	for _, step := range []struct {
		event string
		n     int
	}{
		{gemini.EventBeforeAgent, task},
		{gemini.EventPreCompress, task},
		{gemini.EventPreCompress, c.upTo(`"Done with TASK-A.`)},
		{gemini.EventBeforeAgent, c.upTo(`"FOLLOW-UP`) + 1},
		{gemini.EventPreCompress, compression},
	} {
		r := run(step.event, step.n)
		if r.Output != nil || len(r.Compactions) > 0 || r.Check != nil {
			t.Fatalf("%s before the compression: output %s, %d compactions, check %v: want nothing", step.event, r.Output, len(r.Compactions), r.Check)
		}
		// The log names Gemini CLI's record, and no record searched for:
		// the chat is read whole by design.
		want := " no_compression nothing_checked"
		if step.event == gemini.EventBeforeAgent {
			want = " no_compression nothing_injected"
		}
		if line := r.Line(); !strings.HasSuffix(line, want) || !strings.Contains(line, " whole_file events=") || strings.Contains(line, "not found") {
			t.Errorf("%s's log line %q: want the whole file read, and it to end %q", step.event, line, want)
		}
	}

	r := run(gemini.EventBeforeAgent, next)
	if line := r.Line(); strings.Contains(line, "not found") || strings.Contains(line, "not_written") || strings.Contains(line, "compact_boundary") {
		t.Errorf("the injection's log line %q names a state Gemini CLI's chat does not have", line)
	}
	ctx := hooktest.AdditionalContext(t, r.Output, gemini.EventBeforeAgent)
	// The file Gemini CLI's write_file took as an absolute path is named
	// relative to the project, the hook's cwd, as `strata import --dir`
	// names it.
	for _, want := range []string{"FAILED `ls /nonexistent/strata-dir` (run_shell_command)", "artifact: migrations/003_down.sql",
		"[pending] Review the down migration", "TASK-A: write the down migration for the widgets table"} {
		if !strings.Contains(ctx, want) {
			t.Errorf("the injected state does not hold %q:\n%s", want, ctx)
		}
	}
	if len(r.Compactions) == 0 || !r.Compactions[0].Committed() {
		t.Errorf("compactions %v: want the compaction at the boundary", r.Compactions)
	}
	if r.Check == nil || !slices.Equal(r.Check.Unmentioned, []string{"FAILED `ls /nonexistent/strata-dir` (run_shell_command)", "artifact migrations/003_down.sql"}) {
		t.Fatalf("check %+v: want the failure and the file, which the summary left out", r.Check)
	}
	// The summary stands for what came before the follow-up, which the
	// compression kept as it was.
	var followUp uint64
	_ = db.View(func(s *store.Snapshot) error {
		return s.Events(recordedSession, 1, r.State.Boundary, func(e tier.Event) error {
			if e.Kind == tier.KindUser && strings.HasPrefix(e.Text, "FOLLOW-UP") {
				followUp = e.Seq
			}
			return nil
		})
	})
	if followUp == 0 || r.Check.Boundary != followUp-1 {
		t.Errorf("the check's boundary %d: want %d, the event before the follow-up the compression kept", r.Check.Boundary, followUp-1)
	}

	// Once: a second BeforeAgent, a PreCompress and a BeforeAgent on the
	// whole chat add no injection and no second check.
	if r := run(gemini.EventBeforeAgent, next); r.Output != nil || !r.Injected {
		t.Errorf("a second BeforeAgent: output %q, injected_already %v: want nothing injected", r.Output, r.Injected)
	}
	run(gemini.EventPreCompress, len(c.lines))
	if r := run(gemini.EventBeforeAgent, len(c.lines)); r.Output != nil {
		t.Errorf("a BeforeAgent after the injection: output %q, want none", r.Output)
	}
	own := map[string]int{}
	var users []string
	_ = db.View(func(s *store.Snapshot) error {
		info, err := s.Info(recordedSession)
		if err != nil {
			return err
		}
		return s.Events(recordedSession, 1, info.Head, func(e tier.Event) error {
			if i := strings.LastIndexByte(e.Ref, ':'); strings.HasPrefix(e.Ref, "strata:") && i > 0 {
				own[strings.SplitN(e.Ref, ":", 3)[1]]++
			}
			if e.Kind == tier.KindUser {
				users = append(users, e.Text)
			}
			return nil
		})
	})
	if own["summary-check"] != 1 || own["injected"] != 1 {
		t.Errorf("strata's own events %v: want one check and one injection", own)
	}
	if want := []string{"TASK-A: write the down migration for the widgets table", "FOLLOW-UP: what is the state of the work, and did anything fail?", "NEXT: anything else to do?"}; !slices.Equal(users, want) {
		t.Errorf("the user's words %q, want %q: strata's injection is not the user's", users, want)
	}
}

// Action: PreCompress checks, BeforeAgent injects once, nothing else is
// acted on; install writes both events with Gemini CLI's timeout in
// milliseconds.
func TestAgent(t *testing.T) {
	a := gemini.Agent{}
	for event, want := range map[string]companion.Action{
		"PreCompress": companion.ActionCheck, "BeforeAgent": companion.ActionInjectOnce,
		"SessionStart": companion.ActionIgnore, "AfterAgent": companion.ActionIgnore, "BeforeTool": companion.ActionIgnore,
	} {
		if got := a.Action(&companion.Input{HookEventName: event}); got != want {
			t.Errorf("Action(%s) = %s, want %s", event, got, want)
		}
	}
	s := a.Settings()
	if s.Dir != ".gemini" || s.File != "settings.json" || len(s.Events) != 2 || s.Events[0].Name != "PreCompress" || s.Events[1].Name != "BeforeAgent" {
		t.Errorf("settings %+v", s)
	}
	if h := s.Handler("strata gemini hook"); !slices.Equal(h, companion.Object{{Key: "type", Value: "command"}, {Key: "command", Value: "strata gemini hook"}, {Key: "timeout", Value: 30000}}) {
		t.Errorf("handler %v", h)
	}
	if a.IsRecord([]byte(`{"id":"x"}`), "x") {
		t.Error("IsRecord: a chat is read whole, no line is an anchor")
	}
}
