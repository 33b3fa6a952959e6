package store_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// runProtocol runs the text cases of testdata/protocol/NAME, a file of
// commands and their expected output readable without Go (the commands are
// in docs/testing.md), each on a database of its own. The test file of a
// protocol file runs the cases of that file's promise. Regenerate the
// expected output after a deliberate change with
//
//	go test ./store -run TestX -rewrite
func runProtocol(t *testing.T, name string) {
	h := &ddHarness{t: t, plans: map[string]*store.Plan{}}
	h.db = dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	datadriven.RunTest(t, filepath.Join("testdata", "protocol", name), h.run)
}

// TestProtocol_EveryFileRun: each file of testdata/protocol is run by a
// test (the tests named here), so that no case is left unread.
func TestProtocol_EveryFileRun(t *testing.T) {
	run := map[string]string{
		"claims":     "TestCommit_Claims",
		"invalidate": "TestInvalidate_Frame",
		"refuse":     "TestRefuse_Recorded",
		"resume":     "TestResume_Bytes",
	}
	files, err := os.ReadDir(filepath.Join("testdata", "protocol"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := run[f.Name()]; !ok {
			t.Errorf("testdata/protocol/%s: no test runs it (runProtocol)", f.Name())
		}
		delete(run, f.Name())
	}
	for f, test := range run {
		t.Errorf("%s runs testdata/protocol/%s, which is not there", test, f)
	}
}

// ddHarness holds one file's database and its named plans.
type ddHarness struct {
	t     *testing.T
	db    *store.DB
	plans map[string]*store.Plan
}

func (h *ddHarness) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "append":
		return h.append(t, d)
	case "plan":
		p, err := h.plan(t, d)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		return formatClaims(p.Required.Claims())
	case "commit":
		return h.commit(t, d)
	case "resume":
		id := uint64(store.Latest)
		if d.HasArg("marker") {
			var m int
			d.ScanArgs(t, "marker", &m)
			id = uint64(m)
		}
		ctx, err := h.db.Resume(ddSession(d), id)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		return string(ctx.Text())
	case "state":
		var at int
		d.ScanArgs(t, "at", &at)
		var st checkpoint.State
		err := h.db.View(func(s *store.Snapshot) (err error) {
			st, err = s.StateAt(ddSession(d), uint64(at))
			return err
		})
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		return formatClaims(st.Claims)
	case "markers":
		return h.markers(t, d)
	case "checkpoints":
		return h.checkpoints(t, d)
	case "refusals":
		return h.refusals(t, d)
	case "verify":
		rep, err := h.db.Verify(store.VerifyOptions{})
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		out := fmt.Sprintf("sessions=%d events=%d nodes=%d\n", rep.Sessions, rep.Events, rep.Nodes)
		for _, p := range rep.Problems {
			out += fmt.Sprintf("problem: %+v\n", p)
		}
		return out
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

func ddSession(d *datadriven.TestData) string {
	for _, a := range d.CmdArgs {
		if a.Key == "session" && len(a.Vals) == 1 {
			return a.Vals[0]
		}
	}
	return "s"
}

// append appends the events of d's input, one a line:
//
//	KIND [id=ID] [key=KEY] [name=NAME] [by=KEY] [failed] [text=REST OF LINE]
func (h *ddHarness) append(t *testing.T, d *datadriven.TestData) string {
	var evs []tier.Event
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		ev, err := parseDDEvent(line)
		if err != nil {
			d.Fatalf(t, "%s: %v", line, err)
		}
		evs = append(evs, ev)
	}
	res, err := h.db.Append(ddSession(d), evs...)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	return fmt.Sprintf("seq %d..%d\n", res.First, res.Last)
}

func parseDDEvent(line string) (tier.Event, error) {
	var ev tier.Event
	rest := ""
	if i := strings.Index(line, "text="); i >= 0 {
		line, rest = line[:i], line[i+len("text="):]
		ev.Text = rest
	}
	f := strings.Fields(line)
	if len(f) == 0 {
		return ev, errors.New("no kind")
	}
	k, err := tier.ParseKind(f[0])
	if err != nil {
		return ev, err
	}
	ev.Kind = k
	for _, w := range f[1:] {
		key, val, _ := strings.Cut(w, "=")
		switch key {
		case "id":
			ev.ID = val
		case "key":
			ev.Key = val
		case "name":
			ev.Name = val
		case "by":
			ev.By = val
		case "failed":
			ev.Failed = true
		default:
			return ev, errors.Newf("unknown field %q", key)
		}
	}
	return ev, nil
}

// plan makes a span plan (session=, to=, budget=), with fold=ID k=K a fold
// of the K roots from root ID, with digest a digest, or with recompact=ID
// a re-compaction of root ID, and keeps it under name= (default "p").
func (h *ddHarness) plan(t *testing.T, d *datadriven.TestData) (*store.Plan, error) {
	budget := 100000
	if d.HasArg("budget") {
		d.ScanArgs(t, "budget", &budget)
	}
	var p *store.Plan
	var err error
	switch {
	case d.HasArg("recompact"):
		var node int
		d.ScanArgs(t, "recompact", &node)
		p, err = h.db.PlanRecompact(ddSession(d), uint64(node), budget)
	case d.HasArg("digest"):
		p, err = h.db.PlanDigest(ddSession(d), budget)
	case d.HasArg("fold"):
		var first, k int
		d.ScanArgs(t, "fold", &first)
		d.ScanArgs(t, "k", &k)
		p, err = h.db.PlanFold(ddSession(d), uint64(first), k, budget)
	default:
		var to int
		d.ScanArgs(t, "to", &to)
		p, err = h.db.PlanSpan(ddSession(d), uint64(to), budget)
	}
	if err != nil {
		return nil, err
	}
	name := "p"
	if d.HasArg("name") {
		d.ScanArgs(t, "name", &name)
	}
	h.plans[name] = p
	return p, nil
}

// commit commits the claims of plan name= (default "p"; with to= it plans
// first), the span's required claims edited by d's input, one edit a line:
//
//	drop LIST ID|KEY|SEQ        removes the entries naming ID or KEY (a request: its SEQ)
//	add LIST {json}             appends an entry
//	insert LIST {json}          puts an entry first
//	set LIST ID|KEY|SEQ {json}  overwrites fields of those entries (null clears one)
//
// LIST is a json name of tier.Claims (unresolved, resolved, failures,
// dispositions, constraints, artifacts, requests, plan).
func (h *ddHarness) commit(t *testing.T, d *datadriven.TestData) string {
	name := "p"
	if d.HasArg("name") {
		d.ScanArgs(t, "name", &name)
	}
	p := h.plans[name]
	if d.HasArg("to") || d.HasArg("fold") || d.HasArg("digest") || d.HasArg("recompact") {
		var err error
		if p, err = h.plan(t, d); err != nil {
			return "error: " + err.Error() + "\n"
		}
	}
	if p == nil {
		d.Fatalf(t, "no plan %q", name)
	}
	claims := p.Required.Claims()
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		if line == "" {
			continue
		}
		if err := editClaims(&claims, line); err != nil {
			d.Fatalf(t, "%s: %v", line, err)
		}
	}
	res, err := h.db.Commit(p, store.Summary{Narrative: "n", Claims: claims, Summarizer: "dd"})
	var ie *marker.InvalidError
	switch {
	case errors.As(err, &ie):
		out := fmt.Sprintf("refused checkpoint=%d\n", res.Checkpoint)
		for _, f := range ie.Failures {
			if !slices.Contains(marker.Classes, f.Class) {
				d.Fatalf(t, "class %q is not one of marker.Classes", f.Class)
			}
			out += fmt.Sprintf("%s: %s\n", f, f.Detail)
		}
		return out
	case err != nil:
		return "error: " + err.Error() + "\n"
	}
	out := fmt.Sprintf("valid node=%d L%d [%d,%d] marker=%d checkpoint=%d\n",
		res.Node.ID, res.Node.Depth, res.Node.From, res.Node.To, res.Marker, res.Checkpoint)
	for _, m := range res.InvalidatedMarkers {
		out += fmt.Sprintf("invalidated marker=%d\n", m)
	}
	for _, c := range res.InvalidatedCheckpoints {
		out += fmt.Sprintf("invalidated checkpoint=%d\n", c)
	}
	return out
}

// markers prints the session's markers, one a line: node, depth, the last
// seq covered, the frame version at emission, and the status with the
// reason and the frame version of an invalidation.
func (h *ddHarness) markers(t *testing.T, d *datadriven.TestData) string {
	var sb strings.Builder
	err := h.db.View(func(s *store.Snapshot) error {
		return s.Markers(ddSession(d), func(m marker.Marker) error {
			fmt.Fprintf(&sb, "marker %d node=%d L%d boundary=%d frame_version=%d %s", m.ID, m.Node, m.Depth, m.Boundary, m.FrameVersion, m.Status)
			if m.Reason != "" {
				fmt.Fprintf(&sb, " at frame_version=%d: %s", m.InvalidatedAt, m.Reason)
			}
			sb.WriteString("\n")
			return nil
		})
	})
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	return sb.String()
}

// checkpoints prints the session's checkpoints as markers prints markers:
// the seq, the roots it starts from (prefix) and the status.
func (h *ddHarness) checkpoints(t *testing.T, d *datadriven.TestData) string {
	var sb strings.Builder
	err := h.db.View(func(s *store.Snapshot) error {
		return s.Checkpoints(ddSession(d), func(c checkpoint.Checkpoint) error {
			fmt.Fprintf(&sb, "checkpoint %d seq=%d prefix=%v frame_version=%d %s", c.ID, c.Seq, c.Prefix, c.FrameVersion, c.Status)
			if c.Reason != "" {
				fmt.Fprintf(&sb, " at frame_version=%d: %s", c.InvalidatedAt, c.Reason)
			}
			sb.WriteString("\n")
			return nil
		})
	})
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	return sb.String()
}

// refusals prints the session's recorded refusals: the span, its depth,
// the summarizer and attempt, the checkpoint written instead, and each
// failure a line.
func (h *ddHarness) refusals(t *testing.T, d *datadriven.TestData) string {
	var sb strings.Builder
	err := h.db.View(func(s *store.Snapshot) error {
		return s.Refusals(ddSession(d), func(r store.Refusal) error {
			fmt.Fprintf(&sb, "refusal %d L%d [%d,%d] frame_version=%d summarizer=%s attempt=%d checkpoint=%d\n",
				r.ID, r.Depth, r.From, r.To, r.FrameVersion, r.Summarizer, r.Attempt, r.Checkpoint)
			for _, f := range r.Failures {
				fmt.Fprintf(&sb, "  %s: %s\n", f, f.Detail)
			}
			return nil
		})
	})
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	if sb.Len() == 0 {
		return "no refusals\n"
	}
	return sb.String()
}

// editClaims applies one edit line to c through its JSON form.
func editClaims(c *tier.Claims, line string) error {
	verb, rest, _ := strings.Cut(line, " ")
	list, rest, _ := strings.Cut(rest, " ")
	if verb == "set" && list == "dispositions" {
		return setDisposition(c, rest)
	}
	var all map[string]json.RawMessage
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	var entries []map[string]any
	if raw, ok := all[list]; ok {
		if err := json.Unmarshal(raw, &entries); err != nil {
			return err
		}
	}
	// An entry is named by its id or key, a request by its seq.
	names := func(e map[string]any, id string) bool {
		return e["id"] == id || e["key"] == id || list == "requests" && fmt.Sprint(e["seq"]) == id
	}
	switch verb {
	case "drop":
		entries = slices.DeleteFunc(entries, func(e map[string]any) bool { return names(e, rest) })
	case "add", "insert":
		var e map[string]any
		if err := json.Unmarshal([]byte(rest), &e); err != nil {
			return err
		}
		if verb == "add" {
			entries = append(entries, e)
		} else {
			entries = slices.Insert(entries, 0, e)
		}
	case "set":
		id, patch, _ := strings.Cut(rest, " ")
		var p map[string]any
		if err := json.Unmarshal([]byte(patch), &p); err != nil {
			return err
		}
		n := 0
		for _, e := range entries {
			if !names(e, id) {
				continue
			}
			n++
			for k, v := range p {
				if v == nil {
					delete(e, k)
				} else {
					e[k] = v
				}
			}
		}
		if n == 0 {
			return errors.Newf("no entry of %s names %q", list, id)
		}
	default:
		return errors.Newf("unknown edit %q", verb)
	}
	if all[list], err = json.Marshal(entries); err != nil {
		return err
	}
	if b, err = json.Marshal(all); err != nil {
		return err
	}
	*c = tier.Claims{}
	return json.Unmarshal(b, c) // an entry without "state" or "kind" decodes as kind 0
}

// setDisposition is the set edit of a disposition, on the struct: a state
// that is none (null) or no disposition's (a mere mention) has no JSON form.
func setDisposition(c *tier.Claims, rest string) error {
	key, patch, _ := strings.Cut(rest, " ")
	var p struct {
		State *string
		By    *string
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(patch), &raw); err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(patch), &p); err != nil {
		return err
	}
	n := 0
	for i := range c.Dispositions {
		d := &c.Dispositions[i]
		if d.Key != key {
			continue
		}
		n++
		if _, ok := raw["state"]; ok {
			d.State = 0
			if p.State != nil {
				k, err := tier.ParseKind(*p.State)
				if err != nil {
					return err
				}
				d.State = k
			}
		}
		if _, ok := raw["by"]; ok {
			d.By = ""
			if p.By != nil {
				d.By = *p.By
			}
		}
	}
	if n == 0 || len(raw) != len(slices.DeleteFunc([]string{"state", "by"}, func(f string) bool { _, ok := raw[f]; return !ok })) {
		return errors.Newf("set dispositions %s: no such key, or a field other than state and by", key)
	}
	return nil
}

// formatClaims prints claims one a line, list by list.
func formatClaims(c tier.Claims) string {
	var sb strings.Builder
	put := func(list string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			b = []byte(strconv.Quote(err.Error()))
		}
		fmt.Fprintf(&sb, "%s %s\n", list, b)
	}
	for _, x := range c.Unresolved {
		put("unresolved", x)
	}
	for _, x := range c.Resolved {
		put("resolved", x)
	}
	for _, x := range c.Failures {
		put("failures", x)
	}
	for _, x := range c.Dispositions {
		put("dispositions", x)
	}
	for _, x := range c.Constraints {
		put("constraints", x)
	}
	for _, x := range c.Artifacts {
		put("artifacts", x)
	}
	for _, x := range c.Requests {
		put("requests", x)
	}
	if c.RequestsLeftOut > 0 {
		fmt.Fprintf(&sb, "requests_left_out %d\n", c.RequestsLeftOut)
	}
	for _, x := range c.Plan {
		put("plan", x)
	}
	if c.PlanAt != 0 {
		fmt.Fprintf(&sb, "plan_at %d\n", c.PlanAt)
	}
	if sb.Len() == 0 {
		return "no claims\n"
	}
	return sb.String()
}
