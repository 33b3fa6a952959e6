package claudecode_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/companion/claudecode"
	"github.com/strata-go/strata/companion/internal/hooktest"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// realTranscripts are the real Claude Code transcripts of the shared data,
// each a main session's file.
func realTranscripts(t *testing.T) []string {
	var out []string
	for _, pat := range []string{
		"../../../shared/data/claude-code/*.jsonl",
		"../../../shared/data/realclient/claude-code-*.jsonl",
		"../../../shared/data/transcripts/claude-code/*.jsonl",
	} {
		m, _ := filepath.Glob(pat)
		out = append(out, m...)
	}
	if len(out) == 0 {
		t.Skip("no real Claude Code transcripts under ../../shared/data")
	}
	return out
}

// oracle is what this test reads in the raw records up to a cut, by its
// own reading of Claude Code's format (not package transcript's): the
// user's requests, the open todos of the newest TodoWrite, and each
// target's failures.
type oracle struct {
	session  string
	requests []string
	todos    []string
	// standing and fixed are the targets (a Bash command with its white
	// space made one space, an Edit/Write/MultiEdit file) whose newest
	// is_error result no later successful call on exactly that target
	// followed, or one did.
	standing, fixed []string
}

// clientTags open the text of user records Claude Code writes itself.
var clientTags = []string{"<command-name>", "<command-message>", "<local-command-", "<bash-stdout>", "<bash-stderr>",
	"<task-notification>", "<user-prompt-submit-hook>", "[Request interrupted"}

func readOracle(t *testing.T, lines []string) (oracle, bool) {
	var o oracle
	type call struct{ target string }
	calls := map[string]call{}
	lastFail := map[string]int{} // by target: the index of its newest failure
	lastOK := map[string]int{}
	var order []string
	for i, l := range lines {
		var rec struct {
			Type             string `json:"type"`
			SessionID        string `json:"sessionId"`
			IsSidechain      bool   `json:"isSidechain"`
			IsMeta           bool   `json:"isMeta"`
			IsCompactSummary bool   `json:"isCompactSummary"`
			Message          struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal([]byte(l), &rec) != nil || (rec.Type != "user" && rec.Type != "assistant") {
			continue
		}
		if rec.IsSidechain {
			if o.session == "" {
				return o, false // a sub-agent's file
			}
			continue
		}
		if o.session == "" {
			o.session = rec.SessionID
		}
		var text string
		var blocks []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			IsError   bool            `json:"is_error"`
		}
		if json.Unmarshal(rec.Message.Content, &text) != nil {
			json.Unmarshal(rec.Message.Content, &blocks)
		}
		hasResult := false
		for _, b := range blocks {
			switch b.Type {
			case "text":
				if text == "" {
					text = b.Text
				}
			case "tool_result":
				hasResult = true
				c, ok := calls[b.ToolUseID]
				if !ok || c.target == "" {
					continue
				}
				if b.IsError {
					if _, seen := lastFail[c.target]; !seen {
						order = append(order, c.target)
					}
					lastFail[c.target] = i
				} else {
					lastOK[c.target] = i
				}
			case "tool_use":
				var in struct {
					Command  string `json:"command"`
					FilePath string `json:"file_path"`
					Todos    []struct {
						Content string `json:"content"`
						Status  string `json:"status"`
					} `json:"todos"`
				}
				json.Unmarshal(b.Input, &in)
				target := ""
				switch b.Name {
				case "Bash":
					target = strings.Join(strings.Fields(in.Command), " ")
				case "Edit", "Write", "MultiEdit":
					target = in.FilePath
				case "TodoWrite":
					o.todos = nil
					for _, td := range in.Todos {
						if td.Status == "pending" || td.Status == "in_progress" {
							o.todos = append(o.todos, td.Content)
						}
					}
				}
				calls[b.ID] = call{target}
			}
		}
		if rec.Type == "user" && !rec.IsMeta && !rec.IsCompactSummary && !hasResult && strings.TrimSpace(text) != "" &&
			!slices.ContainsFunc(clientTags, func(tag string) bool { return strings.HasPrefix(strings.TrimSpace(text), tag) }) {
			o.requests = append(o.requests, text)
		}
	}
	for _, target := range order {
		if ok, done := lastOK[target]; done && ok > lastFail[target] {
			o.fixed = append(o.fixed, target)
		} else {
			o.standing = append(o.standing, target)
		}
	}
	return o, o.session != ""
}

// prefix returns the first line of s, trimmed, cut to 60 bytes at a rune
// boundary: what the test looks for in the injected text.
func prefix(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if len(s) > 60 {
		s = tier.TruncateUTF8(s, 60)
	}
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// TestRealTranscripts_InjectedState cuts each real Claude Code transcript
// at several points and runs PreCompact, then SessionStart(compact), in
// the live client's order (its compact_boundary record is written after
// both hooks ran), and checks the injected state against this test's own
// reading of the raw records: the task and the newest request are there,
// every open todo is there, no failure a later success on its exact
// target fixed is shown standing, the block is within the budget; and it
// measures the recall of standing failures by their command or file.
func TestRealTranscripts_InjectedState(t *testing.T) {
	sessions := map[string]bool{}
	var cuts, standing, shown, fixedSeen, todos, standingLines, trueLines int
	for _, path := range realTranscripts(t) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		for _, frac := range []int{1, 2, 3, 4} {
			cut := len(lines) * frac / 4
			o, ok := readOracle(t, lines[:cut])
			if !ok || len(o.requests) == 0 {
				continue
			}
			name := fmt.Sprintf("%s@%d", filepath.Base(path), cut)
			dir := t.TempDir()
			tp := filepath.Join(dir, "t.jsonl")
			if err := os.WriteFile(tp, []byte(strings.Join(lines[:cut], "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			db := dbtest.Open(t, store.Options{NoSync: true})
			h := newHook(t, db, companion.Options{DB: "strata.db"})
			base := companion.Input{SessionID: o.session, TranscriptPath: tp, Cwd: "/work/app"}
			pre, start := base, base
			pre.HookEventName, pre.Trigger = claudecode.EventPreCompact, "auto"
			start.HookEventName, start.Source = claudecode.EventSessionStart, claudecode.SourceCompact
			hooktest.Run(t, h, pre)
			r := hooktest.Run(t, h, start)
			text := r.Rendered.Text
			if text == "" {
				t.Errorf("%s: nothing injected", name)
				continue
			}
			cuts++
			sessions[path] = true
			if r.Rendered.Tokens > companion.DefaultBudget {
				t.Errorf("%s: %d tokens, budget %d", name, r.Rendered.Tokens, companion.DefaultBudget)
			}
			for what, s := range map[string]string{"task": o.requests[0], "newest request": o.requests[len(o.requests)-1]} {
				if !strings.Contains(text, prefix(s)) {
					t.Errorf("%s: the %s %q is not injected:\n%s", name, what, prefix(s), text)
				}
			}
			for _, td := range o.todos {
				todos++
				if !strings.Contains(text, "] "+prefix(td)) {
					t.Errorf("%s: open todo %q is not injected:\n%s", name, td, text)
				}
			}
			// No failure fixed on its exact target stands.
			for _, l := range strings.Split(text, "\n") {
				shownTarget, ok := strings.CutPrefix(l, "- FAILED `")
				if !ok {
					continue
				}
				shownTarget, _, _ = strings.Cut(shownTarget, "` (")
				shownTarget, _, _ = strings.Cut(shownTarget, "…(")
				standingLines++
				if slices.ContainsFunc(o.standing, func(s string) bool { return strings.HasPrefix(s, shownTarget) }) {
					trueLines++
				}
				for _, fx := range o.fixed {
					if fx == shownTarget || len(shownTarget) >= 200 && strings.HasPrefix(fx, shownTarget) {
						if !slices.Contains(o.standing, fx) {
							t.Errorf("%s: %q is shown standing, a later call on it succeeded:\n%s", name, shownTarget, text)
						}
					}
				}
			}
			for _, s := range o.standing {
				standing++
				if strings.Contains(text, "`"+prefix(s)) {
					shown++
				} else {
					t.Logf("%s: standing failure of %q not named", name, prefix(s))
				}
			}
			for _, s := range o.fixed {
				if strings.Contains(text, "`"+prefix(s)) {
					fixedSeen++
				}
			}
		}
	}
	if cuts == 0 {
		t.Skip("no transcript with a request")
	}
	t.Logf("%d sessions, %d cuts: recall %d of %d standing failures injected by command or file; precision %d of %d standing lines name a failure standing on its exact target; %d failures fixed by a later exact success named; %d open todos, all checked",
		len(sessions), cuts, shown, standing, trueLines, standingLines, fixedSeen, todos)
	if standing > 0 && shown*10 < standing*9 {
		t.Errorf("recall of standing failures %d/%d, under 90%%", shown, standing)
	}
}
