package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

const (
	keyRejected = "approach/add-column-then-backfill"
	keyArtifact = "migrations/003_down.sql"
)

func TestReplay_Incident_Lossy(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	out := mustCLI(t, "replay", "--db", db, "--every", "2", "--summarizer", "lossy", incident(t))
	var refused string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "refused ") && strings.Contains(line, "retention:"+keyRejected) && strings.Contains(line, "artifact:"+keyArtifact) {
			refused = line
			break
		}
	}
	if refused == "" {
		t.Fatalf("no refused line naming both %s and %s:\n%s", keyRejected, keyArtifact, out)
	}
	if !regexp.MustCompile(`^refused session=mig depth=1 seq=1\.\.\d+ checkpoint=\d+ reasons=\S+$`).MatchString(refused) {
		t.Errorf("refused line not in the contract's form: %q", refused)
	}
	if !regexp.MustCompile(`(?m)^replayed files=1 events=41 sessions=1 compacted=0 refused=\d+$`).MatchString(out) {
		t.Errorf("no summary line:\n%s", out)
	}

	r := resume(t, db, "mig")
	if r.Source != "checkpoint" {
		t.Errorf("resume source %q, want checkpoint", r.Source)
	}
	for _, k := range []string{keyRejected, keyArtifact} {
		if !strings.Contains(r.Context, k) {
			t.Errorf("resumed context lacks %s", k)
		}
	}
	if r.Marker != nil || r.Checkpoint == nil || r.Reason == "" {
		t.Errorf("resume: marker %v checkpoint %v reason %q", r.Marker, r.Checkpoint, r.Reason)
	}
	dbtest.MustVerify(t, db)
}

// TestReplay_Incident_LossyRepair: with --repair the lossy summarizer's
// refused summaries are committed with the claims from raw, each line saying
// which refusal it repairs and what was missed, and resume serves a marker.
func TestReplay_Incident_LossyRepair(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	out := mustCLI(t, "replay", "--db", db, "--every", "2", "--summarizer", "lossy", "--retries", "1", "--repair", incident(t))
	if strings.Contains(out, "\nrefused ") || strings.HasPrefix(out, "refused ") {
		t.Errorf("--repair left a refusal:\n%s", out)
	}
	missed := ""
	for _, m := range regexp.MustCompile(`(?m)^compacted session=mig depth=1 seq=\d+\.\.\d+ node=\d+ marker=\d+ repaired=\d+ missed=(\S+)$`).FindAllStringSubmatch(out, -1) {
		missed += m[1] + ","
	}
	if !strings.Contains(missed, "retention:"+keyRejected) || !strings.Contains(missed, "artifact:"+keyArtifact) {
		t.Fatalf("no repaired lines naming %s and %s:\n%s", keyRejected, keyArtifact, out)
	}
	m := regexp.MustCompile(`(?m)^replayed files=1 events=41 sessions=1 compacted=(\d+) refused=0 repaired=(\d+)$`).FindStringSubmatch(out)
	if m == nil || m[2] == "0" {
		t.Fatalf("no summary line with repairs:\n%s", out)
	}
	r := resume(t, db, "mig")
	if r.Source != "marker" || r.Marker == nil {
		t.Errorf("resume source %q, want a marker", r.Source)
	}
	for _, k := range []string{keyRejected, keyArtifact} {
		if !strings.Contains(r.Context, k) {
			t.Errorf("resumed context lacks %s", k)
		}
	}
	dbtest.MustVerify(t, db)
}

func TestReplay_Incident_Extractive(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	out := mustCLI(t, "replay", "--db", db, "--every", "2", incident(t))
	if strings.Contains(out, "refused ") {
		t.Errorf("extractive was refused:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^compacted session=mig depth=1 seq=1\.\.\d+ node=1 marker=1$`).MatchString(out) {
		t.Errorf("no compacted line in the contract's form:\n%s", out)
	}
	// Two L1 roots fold into an L2 node that invalidates their markers and
	// checkpoints.
	out = mustCLI(t, "replay", "--db", tempDB(t), "--every", "2", "--fold", "2", incident(t))
	if !regexp.MustCompile(`(?m)^compacted session=mig depth=2 seq=1\.\.\d+ node=\d+ marker=\d+ invalidated_markers=\d+(,\d+)* invalidated_checkpoints=\d+(,\d+)*$`).MatchString(out) {
		t.Errorf("no fold with invalidations:\n%s", out)
	}
	r := resume(t, db, "mig")
	if r.Source != "marker" || r.Marker == nil {
		t.Errorf("resume source %q marker %v, want a marker", r.Source, r.Marker)
	}
	for _, k := range []string{keyRejected, keyArtifact} {
		if !strings.Contains(r.Context, k) {
			t.Errorf("resumed context lacks %s", k)
		}
	}
	dbtest.MustVerify(t, db)
}

// --max-roots bounds the frame: the incident, compacted every turn with
// folds of 2, resumes from one root at most — a digest over the prefix,
// which still carries the rejection and the artifact.
func TestReplay_MaxRoots(t *testing.T) {
	t.Parallel()
	for _, max := range []string{"0", "1"} {
		db := tempDB(t)
		out := mustCLI(t, "replay", "--db", db, "--every", "1", "--fold", "2", "--max-roots", max, incident(t))
		r := resume(t, db, "mig")
		roots := strings.Count(r.Context, "\n## L")
		switch {
		case max == "1" && roots != 1:
			t.Errorf("--max-roots 1: the context holds %d roots:\n%s", roots, out)
		case max == "0" && roots < 2:
			t.Errorf("no bound: the context holds %d roots; the test no longer shows the bound", roots)
		}
		for _, k := range []string{keyRejected, keyArtifact} {
			if !strings.Contains(r.Context, k) {
				t.Errorf("--max-roots %s: resumed context lacks %s", max, k)
			}
		}
		dbtest.MustVerify(t, db)
	}
}

// A bad line stops the replay naming file and line; the events before it
// stay stored.
func TestReplay_BadLine(t *testing.T) {
	t.Parallel()
	good := `{"session":"s","kind":"user","text":"hello"}
{"kind":"tool_call","id":"c1","name":"bash","text":"ls"}
`
	for _, tc := range []struct{ name, line, want string }{
		{"invalid JSON", `{"kind":"assistant","text":`, "tier: bad JSON"},
		{"unknown id", `{"kind":"tool_result","id":"nope","text":"x"}`, "tier: id is not open"},
		{"unknown kind", `{"kind":"dance"}`, "tier: unknown event kind (\"dance\")\nHint: an event's kind is one of: user, assistant, system, tool_call, tool_result, open, close, constraint, withdrawn, rejected, failed, superseded, artifact\n"},
		{"seq out of order", `{"seq":7,"kind":"assistant"}`, "tier: seq out of order"},
		{"opened twice", `{"kind":"tool_call","id":"c1"}`, "tier: id opened twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			file := writeFile(t, "in.jsonl", good+tc.line+"\n"+`{"kind":"assistant","text":"after"}`+"\n")
			db := tempDB(t)
			r := cli(t, "", "replay", "--db", db, "--every", "1", file)
			wantCode(t, r, exitError)
			if !strings.Contains(r.stderr, "Error: "+file+":3: ") || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q, want %s:3 and %q", r.stderr, file, tc.want)
			}
			if !strings.Contains(r.stdout, "replayed files=1 events=2 sessions=1") {
				t.Errorf("summary: %q", r.stdout)
			}
			dump := mustCLI(t, "dump", "--raw", db)
			if !strings.Contains(dump, "head_seq=2 ") || !strings.Contains(dump, `"text":"hello"`) || !strings.Contains(dump, `"id":"c1"`) {
				t.Errorf("the 2 events before the bad line are not stored:\n%s", dump)
			}
			if strings.Contains(dump, "after") {
				t.Errorf("an event after the bad line was stored:\n%s", dump)
			}
			dbtest.MustVerify(t, db)
		})
	}
}

// An event the store refuses in the middle of a batch: the events before it
// are stored, also those of the same batch.
func TestReplay_BadLine_MidBatch(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"session":"s","kind":"user","text":"go"}` + "\n")
	for i := 2; i < 300; i++ {
		fmt.Fprintf(&b, `{"kind":"assistant","text":"line %d"}`+"\n", i)
	}
	b.WriteString(`{"kind":"close","id":"h1"}` + "\n") // line 300
	file := writeFile(t, "in.jsonl", b.String())
	db := tempDB(t)
	r := cli(t, "", "replay", "--db", db, file)
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, file+":300: ") {
		t.Errorf("stderr %q, want %s:300", r.stderr, file)
	}
	if !strings.Contains(r.stdout, "events=299 ") {
		t.Errorf("summary %q, want events=299", r.stdout)
	}
	if ids := sessionsOf(t, db); len(ids) != 1 {
		t.Fatalf("sessions %v", ids)
	}
	if out := mustCLI(t, "dump", db); !strings.Contains(out, "head_seq=299 ") {
		t.Errorf("dump:\n%s", out)
	}
}

func TestReplay_Session(t *testing.T) {
	t.Parallel()
	in := `{"kind":"user","text":"a"}
{"session":"other","kind":"user","text":"b"}
{"kind":"assistant","text":"c"}
`
	t.Run("none", func(t *testing.T) {
		t.Parallel()
		db := tempDB(t)
		r := cli(t, in, "replay", "--db", db, "-")
		wantCode(t, r, exitError)
		if !strings.Contains(r.stderr, "stdin:1: strata: event has no session") || !strings.Contains(r.stderr, "Hint: ") {
			t.Errorf("stderr %q", r.stderr)
		}
	})
	t.Run("flag", func(t *testing.T) {
		t.Parallel()
		db := tempDB(t)
		r := cli(t, in, "replay", "-", "--db", db, "--session", "main") // flags after the argument too
		wantCode(t, r, exitOK)
		if !strings.Contains(r.stdout, "replayed files=1 events=3 sessions=2 ") {
			t.Errorf("stdout %q", r.stdout)
		}
		// A line without a session goes on in the session the file named last.
		out := mustCLI(t, "dump", "--raw", db)
		for _, want := range []string{`"session":"main","kind":"user","turn":1`, `"session":"other","kind":"assistant"`} {
			if !strings.Contains(out, want) {
				t.Errorf("dump lacks %s:\n%s", want, out)
			}
		}
	})
}

// Appends are batched; compactions fall exactly where they would if the
// replay compacted after every event.
func TestReplay_BatchingKeepsCompactions(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := 1; i <= 400; i++ {
		switch {
		case i%9 == 1:
			fmt.Fprintf(&b, `{"session":"s","kind":"user","text":"turn %d"}`+"\n", i)
		case i%13 == 5:
			fmt.Fprintf(&b, `{"session":"s","kind":"rejected","key":"approach/%d","text":"no"}`+"\n", i)
		case i%7 == 3:
			// A call left open across a few events.
			fmt.Fprintf(&b, `{"session":"s","kind":"tool_call","id":"c%d","name":"bash"}`+"\n", i)
			fmt.Fprintf(&b, `{"session":"s","kind":"assistant","text":"waiting"}`+"\n")
			fmt.Fprintf(&b, `{"session":"s","kind":"tool_result","id":"c%d","ok":%v}`+"\n", i, i%2 == 0)
		case i%50 == 0:
			fmt.Fprintf(&b, `{"session":"t","kind":"user","text":"other %d"}`+"\n", i)
		default:
			fmt.Fprintf(&b, `{"session":"s","kind":"assistant","text":"event %d"}`+"\n", i)
		}
	}
	// Every event has its time: the two replays must store the same bytes.
	in := regexp.MustCompile(`(?m)^\{`).ReplaceAllString(b.String(), `{"time":"2024-05-01T10:00:00Z",`)
	file := writeFile(t, "in.jsonl", in)
	for _, flags := range [][]string{
		{"--every", "0", "--every-events", "11", "--fold", "2", "--summarizer", "lossy"},
		{"--every", "3", "--fold", "3", "--summarizer", "lossy", "--drop", "negatives"},
		{"--every", "2", "--every-events", "17", "--fold", "2"},
		{"--every-tokens", "60", "--fold", "2", "--summarizer", "lossy"},
	} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			t.Parallel()
			db := replayed(t, append([]string{"--no-sync"}, flags...), file)
			ref := referenceReplay(t, file, flags)
			got := mustCLI(t, "dump", "--json", "--raw", db)
			want := mustCLI(t, "dump", "--json", "--raw", ref)
			if got != want {
				t.Errorf("batched replay differs from a replay compacting after every event:\n%s", firstDiff(got, want))
			}
			if !strings.Contains(got, `"reasons": "`) && flags[len(flags)-1] != "2" {
				t.Errorf("no refusal at all: the test does not test retries of refused spans")
			}
		})
	}
}

// referenceReplay appends the events of file one at a time through the
// library, compacting after each, with the policy of the CLI flags.
func referenceReplay(t *testing.T, file string, flags []string) string {
	t.Helper()
	o := &replayOptions{}
	cmd := newReplayCommand()
	if err := cmd.Flags().Parse(flags); err != nil {
		t.Fatal(err)
	}
	o.everyTokens, _ = cmd.Flags().GetInt("every-tokens")
	o.every, _ = cmd.Flags().GetInt("every")
	o.everyEvents, _ = cmd.Flags().GetInt("every-events")
	o.fold, _ = cmd.Flags().GetInt("fold")
	o.summarizer, _ = cmd.Flags().GetString("summarizer")
	o.drop, _ = cmd.Flags().GetString("drop")
	sum, err := compaction.New(o.summarizer, strings.Split(o.drop, ","))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ref.db")
	db, err := store.Open(path, store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: sum,
		Policy: compaction.Policy{EveryTokens: o.everyTokens, EveryTurns: o.every, EveryEvents: o.everyEvents, Fold: o.fold}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd := tier.NewReader(f, file, tier.Limits{})
	for {
		rec, err := rd.Next()
		if err != nil {
			break
		}
		if _, err := db.Append(rec.Session, rec.Event); err != nil {
			t.Fatal(err)
		}
		if _, err := comp.Run(context.Background(), rec.Session); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// firstDiff shows where two outputs part.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			lo := max(0, i-5)
			return fmt.Sprintf("line %d:\n got: %s\nwant: %s\ncontext:\n%s", i+1, al[i], bl[i], strings.Join(al[lo:i+1], "\n"))
		}
	}
	return fmt.Sprintf("lengths %d and %d lines", len(al), len(bl))
}

func TestReplay_Usage(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	file := incident(t)
	for _, args := range [][]string{
		{"replay", "--db", db},
		{"replay", file},
		{"replay", "--db", db, "--every", "-1", file},
		{"replay", "--db", db, "--every", "x", file},
		{"replay", "--db", db, "--fold", "1", file},
		{"replay", "--db", db, "--max-roots", "-1", file},
		{"replay", "--db", db, "--summarizer", "eloquent", file},
		{"replay", "--db", db, "--summarizer", "lossy", "--drop", "negatives,vibes", file},
		{"replay", "--db", db, "--budget", "0", file},
		{"replay", "--db", db, "--timeout", "0s", file},
		{"replay", "--db", db, "--nope", file},
		// A flag without effect in the combination given.
		{"replay", "--db", db, "--drop", "negatives", file},
		{"replay", "--db", db, "--summarizer", "extractive", "--drop", "open", file},
		{"replay", "--db", db, "--model", "m", file},
	} {
		r := cli(t, "", args...)
		wantCode(t, r, exitUsage, args...)
		if !strings.HasPrefix(r.stderr, "Error: ") || !strings.Contains(r.stderr, "Hint: run 'strata replay --help'") {
			t.Errorf("%v: stderr %q", args, r.stderr)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("a refused command created the database: %v", err)
	}
}

func TestReplay_Help(t *testing.T) {
	t.Parallel()
	out := mustCLI(t, "replay", "--help")
	for _, flag := range []string{"--db", "--session", "--every", "--every-events", "--fold", "--summarizer", "--drop", "--retries", "--budget", "--timeout"} {
		if !strings.Contains(out, flag+" ") {
			t.Errorf("help does not describe %s:\n%s", flag, out)
		}
	}
}

func TestReplay_Retries(t *testing.T) {
	t.Parallel()
	// Lossy drops the same classes on every attempt: retries do not help,
	// and the refusal records the last attempt.
	db := replayed(t, []string{"--every", "2", "--summarizer", "lossy", "--retries", "2"}, incident(t))
	out := mustCLI(t, "dump", db)
	if !strings.Contains(out, "attempt=2 ") {
		t.Errorf("no refusal after 2 retries:\n%s", out)
	}
}

func TestReplay_MissingFile(t *testing.T) {
	t.Parallel()
	r := cli(t, "", "replay", "--db", tempDB(t), filepath.Join(t.TempDir(), "absent.jsonl"))
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "absent.jsonl") {
		t.Errorf("stderr %q", r.stderr)
	}
}

// The database as the first argument or as --db: the same database. With
// --db every argument is a FILE; a database among them, a missing FILE or
// stdin as the database is bad usage, and nothing is created.
func TestReplay_DBArgument(t *testing.T) {
	t.Parallel()
	flags := []string{"--every", "2", "--fold", "2"}
	a, b := tempDB(t), tempDB(t)
	outA := mustCLI(t, append(append([]string{"replay", "--db", a}, flags...), incident(t))...)
	outB := mustCLI(t, append(append([]string{"replay", b}, flags...), incident(t))...)
	if outA != outB {
		t.Errorf("replay DB and replay --db DB print differently:\n%s", firstDiff(outB, outA))
	}
	if da, db := mustCLI(t, "dump", "--json", a), mustCLI(t, "dump", "--json", b); da != db { // the raw events hold the times they were stored at
		t.Errorf("the databases differ:\n%s", firstDiff(db, da))
	}

	fresh := tempDB(t)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"replay"}, "replay needs a database and at least one FILE"},
		{[]string{"replay", fresh}, "replay needs at least one FILE after the database"},
		{[]string{"replay", "-", incident(t)}, "cannot be stdin"},
		{[]string{"replay", "--db", fresh, a, incident(t)}, "is a database, not a file of events"},
	} {
		r := cli(t, "", tc.args...)
		wantCode(t, r, exitUsage, tc.args...)
		if !strings.Contains(r.stderr, tc.says) {
			t.Errorf("%v: stderr %q lacks %q", tc.args, r.stderr, tc.says)
		}
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("a refused replay created the database: %v", err)
	}

	// The events file given as the database: it is not one, and replay
	// says which argument is the database.
	r := cli(t, "", "replay", incident(t), incident(t))
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "not a strata database") || !strings.Contains(r.stderr, "holds JSON text, not a database: replay's first argument is the database") {
		t.Errorf("stderr %q", r.stderr)
	}
}

// --json: one object per compaction line and the summary, the same counts.
func TestReplay_JSON(t *testing.T) {
	t.Parallel()
	for _, flags := range [][]string{
		{"--every", "2", "--fold", "2", "--summarizer", "lossy", "--drop", "negatives"},
		{"--every", "2", "--summarizer", "lossy", "--retries", "1", "--repair"},
	} {
		text := mustCLI(t, append(append([]string{"replay", tempDB(t)}, flags...), incident(t))...)
		js := mustCLI(t, append(append([]string{"replay", "--json", tempDB(t)}, flags...), incident(t))...)
		tl := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		jl := strings.Split(strings.TrimSuffix(js, "\n"), "\n")
		if len(tl) != len(jl) {
			t.Fatalf("%v: %d text lines, %d JSON lines:\n%s", flags, len(tl), len(jl), js)
		}
		for i, line := range jl {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("line %d %q: %v", i+1, line, err)
			}
			typ, _ := m["type"].(string)
			if !strings.HasPrefix(tl[i], typ+" ") {
				t.Errorf("line %d: type %q, text %q", i+1, typ, tl[i])
				continue
			}
			switch typ {
			case "compacted":
				want := fmt.Sprintf("compacted session=%s depth=%v seq=%v..%v node=%v marker=%v", m["session"], m["depth"], m["from"], m["to"], m["node"], m["marker"])
				if !strings.HasPrefix(tl[i], want) || m["repaired"] == nil || m["missed"] == nil || m["invalidated_markers"] == nil {
					t.Errorf("line %d: %s\ntext %s", i+1, line, tl[i])
				}
				if r := m["repaired"].(float64); r != 0 && !strings.Contains(tl[i], fmt.Sprintf(" repaired=%v ", r)) {
					t.Errorf("line %d: repaired %v, text %s", i+1, r, tl[i])
				}
			case "refused":
				want := fmt.Sprintf("refused session=%s depth=%v seq=%v..%v checkpoint=%v reasons=%s", m["session"], m["depth"], m["from"], m["to"], m["checkpoint"], m["reasons"])
				if tl[i] != want || len(m["failures"].([]any)) == 0 {
					t.Errorf("line %d: %s\ntext %s", i+1, line, tl[i])
				}
			case "replayed":
				if i != len(jl)-1 {
					t.Errorf("the summary is line %d of %d", i+1, len(jl))
				}
				want := fmt.Sprintf("replayed files=%v events=%v sessions=%v compacted=%v refused=%v", m["files"], m["events"], m["sessions"], m["compacted"], m["refused"])
				if m["repaired"] != nil {
					want += fmt.Sprintf(" repaired=%v", m["repaired"])
				}
				if m["known"] != 0.0 {
					want += fmt.Sprintf(" known=%v", m["known"])
				}
				if tl[i] != want {
					t.Errorf("summary %s, text %s", line, tl[i])
				}
			default:
				t.Errorf("line %d: type %q", i+1, typ)
			}
		}
	}
}

// A file replayed again into the database that holds it adds nothing and
// exits 0: each line is recognised by its seq, its place among the
// session's lines, and compared with the stored event.
func TestReplay_AgainAddsNothing(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, "replay", db, "--every-tokens", "200", incident(t))
	before := mustCLI(t, "dump", "--json", "--raw", db)
	r := cli(t, "", "replay", db, "--every-tokens", "200", incident(t))
	wantCode(t, r, exitOK, "replay again")
	if r.stdout != "replayed files=1 events=0 sessions=1 compacted=0 refused=0 known=41\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	if after := mustCLI(t, "dump", "--json", "--raw", db); after != before {
		t.Errorf("the database changed:\n%s\nwas\n%s", after, before)
	}
	// The events dumped with their seqs are recognised by them.
	events := dumpEvents(t, db)
	r = cli(t, "", "replay", db, "--json", writeFile(t, "events.jsonl", events))
	wantCode(t, r, exitOK, "replay the dump")
	if !strings.Contains(r.stdout, `"events":0,"sessions":1,"compacted":0,"refused":0,"known":41}`) {
		t.Errorf("stdout %q", r.stdout)
	}
	dbtest.MustVerify(t, db)
}

// dumpEvents returns the events of db's dump as a JSONL file replay reads,
// each with its session and seq.
func dumpEvents(t testing.TB, db string) string {
	t.Helper()
	var d struct {
		Sessions []struct {
			ID     string           `json:"id"`
			Events []map[string]any `json:"events"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "dump", "--json", "--raw", db)), &d); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range d.Sessions {
		for _, e := range s.Events {
			e["session"] = s.ID
			if e["seq"] == nil {
				t.Fatalf("a dumped event without seq: %v", e)
			}
			line, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(append(line, '\n'))
		}
	}
	return b.String()
}

// A file that extends what is stored appends only its new events, where a
// replay of the whole file would have put them.
func TestReplay_AgainExtends(t *testing.T) {
	t.Parallel()
	lines := strings.SplitAfter(string(readBytes(t, incident(t))), "\n")
	db := tempDB(t)
	mustCLI(t, "replay", db, "--every-tokens", "200", writeFile(t, "part.jsonl", strings.Join(lines[:20], "")))
	r := cli(t, "", "replay", db, "--every-tokens", "200", incident(t))
	wantCode(t, r, exitOK, "replay the whole file")
	if !strings.Contains(r.stdout, "replayed files=1 events=21 sessions=1 ") || !strings.HasSuffix(r.stdout, " known=20\n") {
		t.Errorf("stdout %q", r.stdout)
	}
	// The same compactions as one replay of the whole file.
	whole := replayed(t, []string{"--every-tokens", "200"}, incident(t))
	if got, want := compactions(t, db), compactions(t, whole); got != want {
		t.Errorf("compactions:\n%s\nwant\n%s", got, want)
	}
	r = cli(t, "", "replay", db, incident(t))
	if wantCode(t, r, exitOK); !strings.HasSuffix(r.stdout, " events=0 sessions=1 compacted=0 refused=0 known=41\n") {
		t.Errorf("the whole file again: %q", r.stdout)
	}
	dbtest.MustVerify(t, db)
}

// compactions returns the nodes of db's dump, one line each: where
// compactions fell.
func compactions(t testing.TB, db string) string {
	t.Helper()
	var d struct {
		Sessions []struct {
			Nodes []struct {
				ID       uint64 `json:"id"`
				Depth    int    `json:"depth"`
				From, To uint64
			} `json:"nodes"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "dump", "--json", db)), &d); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range d.Sessions {
		for _, n := range s.Nodes {
			fmt.Fprintf(&b, "node %d depth %d seq %d..%d\n", n.ID, n.Depth, n.From, n.To)
		}
	}
	return b.String()
}

// A file that differs from what is stored is refused before anything of it
// is stored — also its lines of another session, before the conflict —
// naming the first line that differs.
func TestReplay_AgainConflict(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	mustCLI(t, "replay", db, incident(t))
	before := mustCLI(t, "dump", "--json", "--raw", db)
	lines := strings.SplitAfter(string(readBytes(t, incident(t))), "\n")
	edited := append([]string{`{"session":"fresh","kind":"user","text":"a new session"}` + "\n", `{"session":"mig",` + lines[0][1:]}, lines[1:]...)
	edited[30] = strings.Replace(edited[30], "again", "once more", 1) // the file's line 31: seq 30 of mig
	edited = append(edited, `{"kind":"assistant","text":"past the head"}`+"\n")
	file := writeFile(t, "edited.jsonl", strings.Join(edited, ""))
	r := cli(t, "", "replay", db, file)
	wantCode(t, r, exitError, "replay an edited file")
	for _, want := range []string{"Error: " + file + ":31: event seq 30 kind user: tier: the event differs from the one stored at its seq",
		`session "mig" holds seq 30 (kind user) with another text`, "Hint: replay adds to a session only the events it does not hold"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if after := mustCLI(t, "dump", "--json", "--raw", db); after != before {
		t.Errorf("the database changed:\n%s", after)
	}
	// A seq that goes back in the file is refused, not compared.
	r = cli(t, "", "replay", db, writeFile(t, "back.jsonl", `{"session":"s2","seq":1,"kind":"user","text":"x"}
{"session":"s2","seq":2,"kind":"user","text":"y"}
{"session":"s2","seq":1,"kind":"user","text":"x"}
`))
	wantCode(t, r, exitError, "a seq back")
	if !strings.Contains(r.stderr, `back.jsonl:3: event seq 1 kind user: tier: seq out of order (session "s2" had seq 2 on a line before)`) {
		t.Errorf("stderr %q", r.stderr)
	}
}
