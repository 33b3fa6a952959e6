package companion

import (
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// minNameBytes is the shortest name a fact is looked for by: shorter
// ones ("ls") would be found in any text.
const minNameBytes = 4

// maxNameBytes is the longest: a longer command is not quoted whole in a
// summary.
const maxNameBytes = 200

// maxCheckBytes bounds the text of the check's event.
const maxCheckBytes = 64 << 10

// callSubjects are the arguments of the agents' tools that name what a
// call works on: a file, a directory, a command (Codex's exec_command
// names it cmd), a pattern, a URL, a query.
var callSubjects = []string{"file_path", "notebook_path", "path", "command", "cmd", "pattern", "url", "query"}

// Check says which facts of a State an agent's compact summary does not
// mention: a fact is mentioned when its summary text holds one of the
// names the fact goes by — a call's id or the file, command or pattern of
// its arguments (a file also by its path relative to the session's
// directory and by its base name), a disposition's or constraint's key
// (a refused tool use's key also by the file or command it names), an
// artifact's file. Failed and open calls are facts by their target
// (tier.CallTarget), as the injected state lists them: the calls that
// failed on one target are one fact, and a call the user rejected is its
// rejection only. It is a report of names, not a judgement of the
// summary's prose.
type Check struct {
	// Agent is the agent whose summary was checked, by its title ("Claude
	// Code").
	Agent string
	// Summary is the seq of the summary's event; 0 for a summary the hook
	// input carried (FromInput), checked before the agent wrote its
	// record.
	Summary uint64
	// FromInput is the hook event whose input carried the summary
	// ("PostCompact"), when Summary is 0.
	FromInput string
	// Boundary is the seq the state is computed at: the last event the
	// summary stands for.
	Boundary    uint64
	Facts       int      // the facts of the state
	Unmentioned []string // the facts not mentioned, each as "FAILED `make test` (Bash)", "artifact lib/a.ex", in the state's order
}

// fact is one fact of a state and the names it goes by.
type fact struct {
	label string
	names []string
}

// checkSummary compares summary, the text of the event at seq at, with st.
// cwd is the session's directory: files under it are also looked for by
// their relative path.
func checkSummary(s *store.Snapshot, st *State, summary string, at uint64, cwd string) (*Check, error) {
	facts, err := stateFacts(s, st, cwd)
	if err != nil {
		return nil, err
	}
	c := &Check{Summary: at, Facts: len(facts)}
	for _, f := range facts {
		if !mentioned(summary, f.names) {
			c.Unmentioned = append(c.Unmentioned, f.label)
		}
	}
	return c, nil
}

func mentioned(text string, names []string) bool {
	for _, n := range names {
		if len(n) >= minNameBytes && len(n) <= maxNameBytes && strings.Contains(text, n) {
			return true
		}
	}
	return false
}

// stateFacts returns the facts of st in its order, with their names.
func stateFacts(s *store.Snapshot, st *State, cwd string) ([]fact, error) {
	c := &st.Claims
	var out []fact
	at := map[string]int{} // the index in out of a fact by its label
	call := func(label, id string, seq uint64) error {
		names := []string{id}
		if seq != 0 {
			err := s.Events(st.Session, seq, seq, func(e tier.Event) error {
				if e.Kind == tier.KindToolCall && e.ID == id {
					names = append(names, callNames(e.Text, cwd)...)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		if i, ok := at[label]; ok {
			out[i].names = append(out[i].names, names...)
			return nil
		}
		at[label] = len(out)
		out = append(out, fact{label, names})
		return nil
	}
	for _, o := range c.Unresolved {
		if err := call("UNRESOLVED "+callLabel(o.ID, o.Name, o.Target), o.ID, o.Seq); err != nil {
			return nil, err
		}
	}
	for _, r := range c.Failures {
		if slices.Contains(st.Rejected, r.At) {
			continue // its rejection is the fact
		}
		if err := call("FAILED "+callLabel(r.ID, r.Name, r.Target), r.ID, r.Seq); err != nil {
			return nil, err
		}
	}
	for _, d := range c.Dispositions {
		names := []string{d.Key}
		if rest, ok := strings.CutPrefix(d.Key, "tool/"); ok {
			if _, subject, ok := strings.Cut(rest, ":"); ok {
				names = append(names, fileNames(subject, cwd)...)
			}
		}
		out = append(out, fact{tier.StateName(d.State) + " " + oneLine(d.Key), names})
	}
	for _, x := range c.Constraints {
		out = append(out, fact{"constraint " + oneLine(x.Key), []string{x.Key}})
	}
	for _, a := range c.Artifacts {
		out = append(out, fact{"artifact " + oneLine(a.Key), fileNames(a.Key, cwd)})
	}
	return out, nil
}

// callLabel names a call in a check: by its target (tier.CallTarget) and
// tool, "`make test` (Bash)", else by its id, "call toolu_01 (Bash)".
func callLabel(id, name, target string) string {
	what := "call " + oneLine(id)
	if target != "" {
		what = "`" + oneLine(target) + "`"
	}
	if name == "" {
		return what
	}
	return what + " (" + oneLine(name) + ")"
}

// callNames returns the names a call goes by from its arguments (a JSON
// object): the string values of its callSubjects, files also by their
// relative path and base name.
func callNames(input, cwd string) []string {
	var args map[string]json.RawMessage
	if json.Unmarshal([]byte(input), &args) != nil {
		return nil
	}
	var out []string
	for _, k := range callSubjects {
		var v string
		if json.Unmarshal(args[k], &v) != nil || strings.TrimSpace(v) == "" {
			continue
		}
		if k == "command" || k == "cmd" || k == "pattern" || k == "url" || k == "query" {
			out = append(out, strings.TrimSpace(v))
			continue
		}
		out = append(out, fileNames(v, cwd)...)
	}
	return out
}

// fileNames returns the names of file p: itself, relative to cwd when
// under it, and its base name.
func fileNames(p, cwd string) []string {
	out := []string{p}
	if cwd != "" && filepath.IsAbs(p) {
		if rel, err := filepath.Rel(cwd, p); err == nil && !strings.HasPrefix(rel, "..") {
			out = append(out, rel)
		}
	}
	if b := path.Base(filepath.ToSlash(p)); b != p && b != "." && b != "/" {
		out = append(out, b)
	}
	return out
}

// Text is the check as the text of the system event the hook stores,
// which ParseCheck reads back.
func (c *Check) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "strata compared %s's compact summary (", c.Agent)
	if c.Summary == 0 {
		fmt.Fprintf(&b, "%s's compact_summary", c.FromInput)
	} else {
		fmt.Fprintf(&b, "seq %d", c.Summary)
	}
	fmt.Fprintf(&b, ") with the %d facts the raw log implies at seq %d, by the ids, keys, files and commands they name: ", c.Facts, c.Boundary)
	if len(c.Unmentioned) == 0 {
		fmt.Fprintf(&b, "it mentions all %d.", c.Facts)
		return b.String()
	}
	fmt.Fprintf(&b, "it does not mention %d of them:", len(c.Unmentioned))
	for i, l := range c.Unmentioned {
		if b.Len()+len(l) > maxCheckBytes {
			fmt.Fprintf(&b, "\n… and %d more", len(c.Unmentioned)-i)
			break
		}
		b.WriteString("\n- ")
		b.WriteString(l)
	}
	return b.String()
}

// checkHead is the first line of a check's text, as Text writes it.
var checkHead = regexp.MustCompile(`^strata compared (.+?)'s compact summary \((?:seq (\d+)|(\S+)'s compact_summary)\) with the (\d+) facts the raw log implies at seq (\d+), [^:]*: (?:it mentions all \d+\.|it does not mention (\d+) of them:)$`)

// ParseCheck reads back the check the hook stored as event e: ok is false
// when e is not a check's event (a system event whose ref is the hook's
// and whose text Text wrote). Unmentioned holds the facts the text lists;
// Omitted counts them all, those past the text's size limit included.
func ParseCheck(e tier.Event) (c Check, omitted int, ok bool) {
	if e.Kind != tier.KindSystem || !strings.HasPrefix(e.Ref, strataRefPrefix+"summary-check:") {
		return Check{}, 0, false
	}
	lines := strings.Split(e.Text, "\n")
	m := checkHead.FindStringSubmatch(lines[0])
	if m == nil {
		return Check{}, 0, false
	}
	c.Agent, c.FromInput = m[1], m[3]
	c.Summary, _ = strconv.ParseUint(m[2], 10, 64)
	c.Facts, _ = strconv.Atoi(m[4])
	c.Boundary, _ = strconv.ParseUint(m[5], 10, 64)
	omitted, _ = strconv.Atoi(m[6])
	for _, l := range lines[1:] {
		if label, found := strings.CutPrefix(l, "- "); found {
			c.Unmentioned = append(c.Unmentioned, label)
		}
	}
	return c, omitted, true
}
