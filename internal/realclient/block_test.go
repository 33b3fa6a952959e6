package realclient_test

import (
	"encoding/json"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// strataBlock returns strata's injected block in a model request's text:
// from its "# strata" heading through its sections.
func strataBlock(t *testing.T, text string) string {
	t.Helper()
	i := strings.Index(text, "# strata")
	if i < 0 {
		t.Fatalf("the model request holds no strata block:\n%.2000s", text)
	}
	var out []string
	for j, line := range strings.Split(text[i:], "\n") {
		if j > 0 && line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "- ") &&
			!strings.HasPrefix(line, "  ") &&
			!strings.HasPrefix(line, "Computed by strata") && !strings.HasPrefix(line, "Every fact") {
			break
		}
		out = append(out, line)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

var (
	failedLine   = regexp.MustCompile("^- FAILED `(.+?)` \\((\\S+)\\) — .*\\(call (\\S+)\\)$")
	wordsLine    = regexp.MustCompile(`^## the (task|user's newest request) \(.*\), in the user's words:$`)
	artifactLine = regexp.MustCompile(`^- artifact: (.+?) — written by (\S+) \(call (\S+)\)`)
	planLine     = regexp.MustCompile(`^- \[(\S+)\] (.+)$`)
	sectionLine  = regexp.MustCompile(`^## .*: (\d+)$`)
)

// checkImplied checks that every fact line of the block is implied by the
// transcript, as the importer reads it: the task and the newest request
// are a user's words, a failed call is a failed result of a call of that
// tool whose input holds the command named, an artifact a file that call
// wrote, a plan item an item of a plan call's input (TodoWrite,
// update_plan, write_todos); and every section holds as many lines as
// its heading counts.
func checkImplied(t *testing.T, block string, ss []transcript.Session) {
	t.Helper()
	names, inputs, failed, written := map[string]string{}, map[string]string{}, map[string]bool{}, map[string]string{}
	var said []string
	for _, s := range ss {
		for _, e := range s.Events {
			switch {
			case e.Kind == tier.KindUser:
				said = append(said, e.Text)
			case e.Kind == tier.KindToolCall:
				names[e.ID], inputs[e.ID] = e.Name, e.Text
			case e.Kind == tier.KindToolResult && e.Failed:
				failed[e.ID] = true
			case e.Kind == tier.KindArtifact:
				written[e.Key] = e.Text
			}
		}
	}
	want, got := -1, 0
	section, words := "", false
	closeSection := func() {
		if want >= 0 && got != want {
			t.Errorf("section %q counts %d, lists %d", section, want, got)
		}
	}
	for _, line := range strings.Split(block, "\n") {
		if m := sectionLine.FindStringSubmatch(line); m != nil {
			closeSection()
			section, got, words = line, 0, false
			want, _ = strconv.Atoi(m[1])
			continue
		}
		if wordsLine.MatchString(line) {
			closeSection()
			section, want, words = line, -1, true
			continue
		}
		if words && strings.HasPrefix(line, "  ") {
			w := strings.TrimSuffix(strings.TrimSpace(line), "…")
			if !slices.ContainsFunc(said, func(u string) bool { return strings.Contains(u, w) }) {
				t.Errorf("%q under %q: no user's words in the transcript hold it", line, section)
			}
			continue
		}
		if !strings.HasPrefix(line, "- ") {
			continue
		}
		got++
		if m := failedLine.FindStringSubmatch(line); m != nil {
			if id := m[3]; !failed[id] || names[id] != m[2] || !strings.Contains(inputs[id], m[1]) {
				t.Errorf("%q: the transcript has no failed %s call %s of %s", line, m[2], id, m[1])
			}
			continue
		}
		if m := planLine.FindStringSubmatch(line); m != nil {
			item := strings.TrimSuffix(m[2], "…")
			planned := false
			for id, name := range names {
				planned = planned || (name == "TodoWrite" || name == "update_plan" || name == "write_todos") && strings.Contains(inputs[id], item)
			}
			if !planned {
				t.Errorf("%q: no plan call of the transcript holds the item", line)
			}
			continue
		}
		if m := artifactLine.FindStringSubmatch(line); m != nil {
			if text, ok := written[m[1]]; !ok || !strings.Contains(text, m[3]) || names[m[3]] != m[2] {
				t.Errorf("%q: the transcript has no write of %s by %s call %s", line, m[1], m[2], m[3])
			}
			continue
		}
		t.Errorf("%q: a fact line this test cannot trace to the transcript", line)
	}
	closeSection()
}

// checkSummaryOmitted checks the summary check of `strata AGENT status
// --json`: what the client's summary did not mention (summary_omitted)
// names each of wants.
func checkSummaryOmitted(t *testing.T, dir string, env []string, strata, agent string, wants []string) {
	t.Helper()
	st := exec.Command(strata, agent, "status", "--json")
	st.Dir, st.Env = dir, env
	out, err := st.Output()
	if err != nil {
		t.Fatalf("strata %s status --json: %v\n%s", agent, err, out)
	}
	var doc any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("strata %s status --json: %v\n%s", agent, err, out)
	}
	var omitted []string
	var walk func(v any, under bool)
	walk = func(v any, under bool) {
		switch x := v.(type) {
		case string:
			if under {
				omitted = append(omitted, x)
			}
		case []any:
			for _, e := range x {
				walk(e, under)
			}
		case map[string]any:
			for k, e := range x {
				walk(e, under || k == "summary_omitted")
			}
		}
	}
	walk(doc, false)
	all := strings.Join(omitted, "\n")
	for _, w := range wants {
		if !strings.Contains(all, w) {
			t.Errorf("summary_omitted %q does not name %q, which the summary left out\n%s", omitted, w, out)
		}
	}
}
