package postgres_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/jackc/pgx/v5"

	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/internal/pgtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/store/storetest"
	"github.com/strata-go/strata/tier"
)

var (
	fleetKills    = flag.Int("strata.fleet-kills", 6, "SIGKILLs of TestFleet_KillLoop's processes")
	fleetRestarts = flag.Int("strata.fleet-restarts", 2, "server restarts of TestFleet_ServerRestart, each after the server ended the store's connections")
)

// The fleet: fleetProcs processes of fleetWriters goroutines each, every
// goroutine appending to and compacting sessions picked at random among
// fleetSessions, which every process shares.
const (
	fleetProcs    = 4
	fleetSessions = 16
	fleetWriters  = 2
	fleetResumers = 3 // fresh processes that resume every session at the end
)

// envFleet makes the test binary a fleet process; it holds a fleetConfig
// as JSON.
const envFleet = "STRATA_TEST_PG_FLEET"

// fleetConfig is what a fleet process is told.
type fleetConfig struct {
	URL  string
	Proc int // the process's number
	Inc  int // how many times it was started before
	Seed uint64
	// Tolerate: the server goes away while the process runs, so a failed
	// append, compaction or resume is reported ("fail", "runfail",
	// "resumefail") and the process goes on with the same DB. Otherwise
	// it is an "error", and the process exits.
	Tolerate bool
	// Resume: print "sha SESSION SHA256" of every session's resumed
	// context, and exit.
	Resume bool
}

// fleetProcess is the fleet process's side. Each writer goroutine appends
// to a session, then prints "ack TAG SESSION FIRST LAST" — only after
// Append returned nil — and runs the session's compactor ("run SESSION
// COMMITS REFUSALS CONFLICTS OUT-OF-REPLANS"); every fourth round it
// resumes the session. Closing stdin stops it: it closes the DB and prints
// "done".
func fleetProcess(v string) int {
	var c fleetConfig
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		fmt.Println("error", err)
		return 1
	}
	var out fleetOut
	db, err := store.Open(c.URL, store.Options{})
	if err != nil {
		out.line("error open: %s", oneLine(err))
		return 1
	}
	if c.Resume {
		ids, err := db.Sessions()
		if err != nil {
			out.line("error sessions: %s", oneLine(err))
			return 1
		}
		for _, s := range ids {
			rc, err := db.Resume(s, store.Latest)
			if err != nil {
				out.line("error resume %s: %s", s, oneLine(err))
				return 1
			}
			out.line("sha %s %s", s, rc.SHA256())
		}
		return 0
	}
	var stop atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop.Store(true)
	}()
	var wg sync.WaitGroup
	var failed atomic.Bool
	for g := range fleetWriters {
		w := &fleetWriter{c: &c, db: db, out: &out, g: g, rng: rand.New(rand.NewPCG(c.Seed, uint64(g)))}
		wg.Go(func() {
			if err := w.run(&stop); err != nil {
				out.line("error %s", oneLine(err))
				failed.Store(true)
				stop.Store(true)
			}
		})
	}
	wg.Wait()
	if err := db.Close(); err != nil {
		out.line("error close: %s", oneLine(err))
		return 1
	}
	if failed.Load() {
		return 1
	}
	out.line("done")
	return 0
}

// fleetOut writes a fleet process's lines to stdout, each in one write: a
// pipe delivers a short line whole or not at all.
type fleetOut struct{ mu sync.Mutex }

func (o *fleetOut) line(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = os.Stdout.WriteString(fmt.Sprintf(format, args...) + "\n")
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

// fleetWriter is one appending goroutine of a fleet process.
type fleetWriter struct {
	c   *fleetConfig
	db  *store.DB
	out *fleetOut
	g   int
	rng *rand.Rand
}

// counted counts its summarizer's calls: a compaction that met another's
// commit (store.ErrConflict) is planned and summarized again, and that
// call is in no Result.
type counted struct {
	compaction.Summarizer
	calls *int
}

func (s counted) Summarize(ctx context.Context, in *compaction.Input) (compaction.Output, error) {
	*s.calls++
	return s.Summarizer.Summarize(ctx, in)
}

// run appends and compacts until stop is set.
func (w *fleetWriter) run(stop *atomic.Bool) error {
	lossy, err := compaction.NewLossy(compaction.DropNegatives, compaction.DropArtifacts)
	if err != nil {
		return err
	}
	calls := 0
	policy := compaction.Policy{EveryEvents: 10, Fold: 3, MaxRoots: 4}
	comps := make([]*compaction.Compactor, 2)
	for i, sum := range []compaction.Summarizer{compaction.Extractive{}, lossy} {
		if comps[i], err = compaction.NewCompactor(w.db, compaction.Options{Summarizer: counted{sum, &calls}, Policy: policy}); err != nil {
			return err
		}
	}
	ctx := context.Background()
	for n := 0; !stop.Load(); n++ {
		i := w.rng.IntN(fleetSessions)
		s := fmt.Sprintf("s%02d", i)
		tag := fmt.Sprintf("p%d.%d.%d.%d", w.c.Proc, w.c.Inc, w.g, n)
		res, err := w.db.Append(s, fleetEvents(w.rng, tag)...)
		if err != nil {
			if !w.c.Tolerate {
				return errors.Wrapf(err, "append %s to %s", tag, s)
			}
			w.out.line("fail %s %s %t %s", tag, s, errors.Is(err, postgres.ErrCommitUnknown), oneLine(err))
			continue
		}
		w.out.line("ack %s %s %d %d", tag, s, res.First, res.Last)
		// The last quarter of the sessions gets a summarizer that drops
		// facts: refusals, their checkpoints and audit records.
		before := calls
		comp := comps[0]
		if i >= fleetSessions*3/4 {
			comp = comps[1]
		}
		rs, err := comp.Run(ctx, s)
		attempts, commits := 0, 0
		for _, r := range rs {
			attempts += r.Attempts
			if r.Committed() {
				commits++
			}
		}
		switch {
		case err == nil || errors.Is(err, store.ErrConflict): // ErrConflict: re-planned as often as Run does, and another commit came first each time
			w.out.line("run %s %d %d %d %t", s, commits, len(rs)-commits, calls-before-attempts, err != nil)
		case w.c.Tolerate:
			w.out.line("runfail %s %s", s, oneLine(err))
		default:
			return errors.Wrapf(err, "compact %s", s)
		}
		if n%4 == 3 {
			if _, err := w.db.Resume(s, store.Latest); err != nil {
				if !w.c.Tolerate {
					return errors.Wrapf(err, "resume %s", s)
				}
				w.out.line("resumefail %s %s", s, oneLine(err))
			}
		}
	}
	return nil
}

// fleetEvents is one append: a user message, a call and its result (a
// failure, at times), and at times an artifact or a rejection. Every event
// is valid whatever the session holds, and its text begins "TAG J/K": the
// append's tag, and the event's place in it.
func fleetEvents(rng *rand.Rand, tag string) []tier.Event {
	evs := []tier.Event{
		{Kind: tier.KindUser},
		{Kind: tier.KindToolCall, ID: tag, Name: "bash"},
		{Kind: tier.KindToolResult, ID: tag},
	}
	switch rng.IntN(4) {
	case 0:
		evs[2].Failed, evs[2].Key = true, fmt.Sprintf("approach/%d", rng.IntN(5))
	case 1:
		evs = append(evs, tier.Event{Kind: tier.KindArtifact, Key: fmt.Sprintf("out/%d.txt", rng.IntN(8))})
	case 2:
		evs = append(evs, tier.Event{Kind: tier.KindRejected, Key: fmt.Sprintf("idea/%d", rng.IntN(6))})
	}
	for j := range evs {
		evs[j].Text = fmt.Sprintf("%s %d/%d", tag, j, len(evs))
	}
	evs[0].Text += strings.Repeat(" lorem", rng.IntN(30))
	return evs
}

// fleet is the parent's side: the processes, what they reported, and the
// counts.
type fleet struct {
	t     *testing.T
	cfg   fleetConfig // URL, Tolerate, Seed
	exe   string
	procs []*fleetProc
	lines chan fleetLine
	rng   *rand.Rand

	acks     map[string]stored    // tag → where the append was acknowledged
	fails    map[string]fleetFail // tag → the append reported failed
	reported map[string]int       // writer ("p.inc.g") → appends it reported
	killed   map[string]bool      // process incarnations ("p.inc") SIGKILLed
	others   []string             // the errors of the compactions and resumes that failed

	n fleetCounts
}

type fleetCounts struct {
	acked, events, failed, unknown, unknownStored, inFlightStored           int
	runs, commits, refusals, conflicts, outOfReplans, runFails, resumeFails int
	kills, terminations, restarts                                           int
}

type fleetFail struct {
	session string
	unknown bool // marked ErrCommitUnknown
	msg     string
}

type fleetProc struct {
	p, inc int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	ended  bool // its stdout reached EOF
	acks   int  // acknowledged since mark
	last   []string
}

type fleetLine struct {
	p, inc int
	text   string
	eof    bool
}

func newFleet(t *testing.T, url string, tolerate bool) *fleet {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	f := &fleet{
		t: t, exe: exe, cfg: fleetConfig{URL: url, Tolerate: tolerate, Seed: seed},
		lines: make(chan fleetLine, 1024), rng: rand.New(rand.NewPCG(seed, 0)),
		acks: map[string]stored{}, fails: map[string]fleetFail{}, reported: map[string]int{}, killed: map[string]bool{},
	}
	t.Cleanup(func() {
		for _, p := range f.procs {
			if p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
				_ = p.cmd.Wait()
			}
		}
	})
	for p := range fleetProcs {
		f.procs = append(f.procs, f.start(p, 0))
	}
	return f
}

// start starts incarnation inc of process p.
func (f *fleet) start(p, inc int) *fleetProc {
	f.t.Helper()
	cfg := f.cfg
	cfg.Proc, cfg.Inc, cfg.Seed = p, inc, f.cfg.Seed+uint64(p*1000+inc)
	cmd, stdin := f.command(cfg)
	return &fleetProc{p: p, inc: inc, cmd: cmd, stdin: stdin}
}

// command starts a fleet process told cfg, whose lines go to f.lines.
func (f *fleet) command(cfg fleetConfig) (*exec.Cmd, io.WriteCloser) {
	f.t.Helper()
	v, _ := json.Marshal(cfg)
	cmd := exec.Command(f.exe)
	cmd.Env = append(os.Environ(), envFleet+"="+string(v))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			f.lines <- fleetLine{p: cfg.Proc, inc: cfg.Inc, text: sc.Text()}
		}
		f.lines <- fleetLine{p: cfg.Proc, inc: cfg.Inc, eof: true}
	}()
	return cmd, stdin
}

// until handles the processes' lines until cond holds.
func (f *fleet) until(cond func() bool) {
	f.t.Helper()
	for !cond() {
		f.handle(<-f.lines)
	}
}

// during runs do on a goroutine of its own, handling the processes' lines
// until it returns.
func (f *fleet) during(do func() error) {
	f.t.Helper()
	done := make(chan error, 1)
	go func() { done <- do() }()
	for {
		select {
		case l := <-f.lines:
			f.handle(l)
		case err := <-done:
			if err != nil {
				f.t.Fatal(err)
			}
			return
		}
	}
}

// handle records one line of a process.
func (f *fleet) handle(l fleetLine) {
	f.t.Helper()
	p := f.procs[l.p]
	if l.inc != p.inc {
		f.t.Fatalf("a line of process %d.%d, after it was restarted: %q", l.p, l.inc, l.text)
	}
	if l.eof {
		p.ended = true
		return
	}
	p.last = append(p.last[max(0, len(p.last)-4):], l.text)
	fields := strings.SplitN(l.text, " ", 5)
	switch fields[0] {
	case "ack", "fail":
		tag, session := fields[1], fields[2]
		w, n := writerOf(tag)
		if n != f.reported[w] {
			f.t.Fatalf("writer %s reported append %d after %d appends", w, n, f.reported[w])
		}
		f.reported[w]++
		if fields[0] == "fail" {
			unknown := fields[3] == "true"
			f.fails[tag] = fleetFail{session: session, unknown: unknown, msg: fields[4]}
			f.n.failed++
			if unknown {
				f.n.unknown++
			}
			return
		}
		first, err1 := strconv.ParseUint(fields[3], 10, 64)
		last, err2 := strconv.ParseUint(fields[4], 10, 64)
		if err1 != nil || err2 != nil || last < first {
			f.t.Fatalf("process %d: %q", l.p, l.text)
		}
		f.acks[tag] = stored{session: session, first: first, last: last}
		f.n.acked++
		f.n.events += int(last - first + 1)
		p.acks++
	case "run":
		r := strings.Fields(l.text)
		commits, _ := strconv.Atoi(r[2])
		refusals, _ := strconv.Atoi(r[3])
		conflicts, _ := strconv.Atoi(r[4])
		f.n.runs++
		f.n.commits += commits
		f.n.refusals += refusals
		f.n.conflicts += conflicts
		if r[5] == "true" {
			f.n.outOfReplans++
		}
	case "runfail":
		f.others = append(f.others, strings.Join(fields[2:], " "))
		f.n.runFails++
	case "resumefail":
		f.others = append(f.others, strings.Join(fields[2:], " "))
		f.n.resumeFails++
	case "done":
	default:
		f.t.Fatalf("process %d.%d: %q", l.p, l.inc, l.text)
	}
}

// writerOf splits an append's tag "P.INC.G.N" into its writer "P.INC.G"
// and N.
func writerOf(tag string) (string, int) {
	i := strings.LastIndexByte(tag, '.')
	n, _ := strconv.Atoi(tag[i+1:])
	return tag[:i], n
}

// acked returns a condition: n more appends acknowledged, by any process.
func (f *fleet) acked(n int) func() bool {
	target := f.n.acked + n
	return func() bool { return f.n.acked >= target }
}

// progress returns a condition: every process has acknowledged n appends
// since now.
func (f *fleet) progress(n int) func() bool {
	for _, p := range f.procs {
		p.acks = 0
	}
	return func() bool {
		for _, p := range f.procs {
			if p.acks < n {
				return false
			}
		}
		return true
	}
}

// kill SIGKILLs process p, handles its last lines, and starts it again.
func (f *fleet) kill(p int) {
	f.t.Helper()
	fp := f.procs[p]
	_ = fp.cmd.Process.Signal(syscall.SIGKILL)
	f.until(func() bool { return fp.ended })
	err := fp.cmd.Wait()
	if ws, ok := fp.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		f.t.Fatalf("process %d.%d ended before it was killed (%v): %q", p, fp.inc, err, fp.last)
	}
	f.killed[fmt.Sprintf("p%d.%d", p, fp.inc)] = true
	f.n.kills++
	f.procs[p] = f.start(p, fp.inc+1)
}

// stop closes every process's stdin and waits for it to close its DB and
// exit.
func (f *fleet) stop() {
	f.t.Helper()
	for _, p := range f.procs {
		_ = p.stdin.Close()
	}
	f.until(func() bool {
		for _, p := range f.procs {
			if !p.ended {
				return false
			}
		}
		return true
	})
	for _, p := range f.procs {
		if err := p.cmd.Wait(); err != nil || len(p.last) == 0 || p.last[len(p.last)-1] != "done" {
			f.t.Fatalf("process %d.%d: %v, last lines %q", p.p, p.inc, err, p.last)
		}
	}
}

// stored is where an append's events are.
type stored struct {
	session     string
	first, last uint64
}

// check reads every session and checks it against what the processes
// reported: seqs gapless; every append stored whole or not at all, once;
// every acknowledged one where its process was told; a failed one stored
// only when its commit's outcome was unknown; an append never reported
// stored only as the last of a killed process's writer; each writer's
// appends to a session in its order. Then Verify, and the resumed
// contexts of every session from fresh processes against db's.
func (f *fleet) check(db *store.DB) {
	t := f.t
	t.Helper()
	where := map[string]stored{}
	shas := map[string]string{}
	for i := range fleetSessions {
		s := fmt.Sprintf("s%02d", i)
		evs := storetest.Events(t, db, s)
		lastN := map[string]int{} // writer → its last append in s
		for k := 0; k < len(evs); {
			e := evs[k]
			if e.Seq != uint64(k+1) {
				t.Fatalf("%s: event %d at seq %d: a gap", s, k, e.Seq)
			}
			tag, pos, _ := strings.Cut(e.Text, " ")
			var j, n int
			if _, err := fmt.Sscanf(pos, "%d/%d", &j, &n); err != nil || j != 0 || k+n > len(evs) {
				t.Fatalf("%s seq %d: %q begins no whole append", s, e.Seq, e.Text)
			}
			for j := range n {
				if want := fmt.Sprintf("%s %d/%d", tag, j, n); !strings.HasPrefix(evs[k+j].Text, want) || evs[k+j].Seq != e.Seq+uint64(j) {
					t.Fatalf("%s seq %d: %q, want %q: an append stored in part", s, evs[k+j].Seq, evs[k+j].Text, want)
				}
			}
			if w, ok := where[tag]; ok {
				t.Fatalf("append %s stored twice: %s seq %d and %s seq %d (acknowledged %+v, failed %+v)", tag, w.session, w.first, s, e.Seq, f.acks[tag], f.fails[tag])
			}
			where[tag] = stored{s, e.Seq, e.Seq + uint64(n) - 1}
			w, wn := writerOf(tag)
			if last, ok := lastN[w]; ok && wn <= last {
				t.Fatalf("%s: writer %s's append %d at seq %d, after its append %d", s, w, wn, e.Seq, last)
			}
			lastN[w] = wn
			k += n
		}
		rc, err := db.Resume(s, store.Latest)
		if err != nil {
			t.Fatalf("resume %s: %v", s, err)
		}
		shas[s] = rc.SHA256()
	}
	for tag, a := range f.acks {
		if w, ok := where[tag]; !ok || w != a {
			t.Errorf("append %s, acknowledged at %s seq %d..%d, is stored at %+v (found: %v)", tag, a.session, a.first, a.last, w, ok)
		}
	}
	for tag, fl := range f.fails {
		if w, ok := where[tag]; ok {
			if !fl.unknown {
				t.Errorf("append %s failed (%s), and is stored at %s seq %d", tag, fl.msg, w.session, w.first)
			}
			f.n.unknownStored++
		}
	}
	for tag, w := range where {
		_, acked := f.acks[tag]
		_, failed := f.fails[tag]
		if acked || failed {
			continue
		}
		writer, n := writerOf(tag)
		proc := writer[:strings.LastIndexByte(writer, '.')]
		if !f.killed[proc] || n != f.reported[writer] {
			t.Errorf("append %s, stored at %s seq %d, was never reported by its process (killed: %v), whose writer reported %d appends",
				tag, w.session, w.first, f.killed[proc], f.reported[writer])
		}
		f.n.inFlightStored++
	}
	dbtest.Verify(t, db)
	for r := range fleetResumers {
		cfg := f.cfg
		cfg.Resume, cfg.Proc = true, r
		cmd, stdin := f.command(cfg)
		_ = stdin.Close()
		got := map[string]string{}
		for l := range f.lines {
			if l.eof {
				break
			}
			fields := strings.Fields(l.text)
			if len(fields) != 3 || fields[0] != "sha" {
				t.Fatalf("resuming process %d: %q", r, l.text)
			}
			got[fields[1]] = fields[2]
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("resuming process %d: %v", r, err)
		}
		if len(got) != len(shas) {
			t.Errorf("process %d resumed %d sessions, want %d", r, len(got), len(shas))
		}
		for s, sha := range shas {
			if got[s] != sha {
				t.Errorf("%s resumes to %s in process %d, %s here", s, got[s], r, sha)
			}
		}
	}
}

// log logs the counts, and the errors of the appends that failed.
func (f *fleet) log() {
	n := f.n
	f.t.Logf("%d kills, %d server restarts, %d times the server ended the connections; "+
		"%d appends acknowledged (%d events), all stored once, whole, in order; %d stored appends in flight at a kill; "+
		"%d appends failed (%d commits unknown, %d of those stored), %d compaction runs failed, %d resumes failed; "+
		"%d compaction runs: %d compactions committed, %d refused, %d re-planned after a conflict, %d runs out of re-plans (store.ErrConflict); "+
		"Verify clean, every session resumed to the same sha256 in %d fresh processes",
		n.kills, n.restarts, n.terminations, n.acked, n.events, n.inFlightStored,
		n.failed, n.unknown, n.unknownStored, n.runFails, n.resumeFails,
		n.runs+n.runFails, n.commits, n.refusals, n.conflicts, n.outOfReplans, fleetResumers)
	for tag, fl := range f.fails {
		f.t.Logf("append %s failed (commit unknown: %v): %s", tag, fl.unknown, fl.msg)
	}
	// The compactions' and resumes' errors, by what follows the server's
	// name.
	kinds := map[string]int{}
	for _, msg := range f.others {
		if i := strings.Index(msg, " schema "); i >= 0 {
			msg = msg[i:]
			msg = msg[strings.IndexByte(msg, ':')+2:]
		}
		kinds[msg]++
	}
	for msg, n := range kinds {
		f.t.Logf("%d compactions or resumes failed: %s", n, msg)
	}
}

// TestFleet_KillLoop runs fleetProcs processes appending to and compacting
// fleetSessions shared sessions — appends to one session from several
// processes take turns — and SIGKILLs one at random, after a random number
// of appends, and starts it again, -strata.fleet-kills times. Then every
// acknowledged append is stored once, whole and in its writer's order,
// seqs are gapless, Verify is clean, and every session resumes to the same
// bytes in fresh processes.
func TestFleet_KillLoop(t *testing.T) {
	skipShort(t)
	url := pgtest.URL(t)
	db := openDB(t, url, store.Options{Create: true})
	f := newFleet(t, url, false)
	for range *fleetKills {
		f.until(f.acked(10 + f.rng.IntN(40)))
		f.kill(f.rng.IntN(fleetProcs))
	}
	f.until(f.progress(5))
	f.stop()
	f.check(db)
	f.log()
	if f.n.kills != *fleetKills {
		t.Fatalf("%d kills, want %d", f.n.kills, *fleetKills)
	}
}

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts child processes")
	}
}

// terminate ends every connection of the stores' pools on the server at
// url (pg_terminate_backend).
func terminate(url string) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = 'strata'`).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return errors.New("no connection of the stores' pools to end")
	}
	return nil
}

// TestFleet_ServerRestart runs the fleet of TestFleet_KillLoop on a server
// of its own while the server ends every connection of the stores' pools
// (pg_terminate_backend) and, after that, restarts (pg_ctl restart -m
// fast), -strata.fleet-restarts times. An append in flight then either
// succeeds or fails with the store's error naming the server — one whose
// COMMIT was sent is marked ErrCommitUnknown, the only kind that may be
// stored — and never in part; every process goes on with the DB it opened,
// acknowledging appends after each restart; nothing acknowledged is lost.
func TestFleet_ServerRestart(t *testing.T) {
	skipShort(t)
	cl := pgtest.StartCluster(t)
	db := openDB(t, cl.URL, store.Options{Create: true})
	f := newFleet(t, cl.URL, true)
	for range *fleetRestarts {
		f.until(f.progress(10))
		f.n.terminations++
		f.during(func() error { return terminate(cl.URL) })
		f.until(f.progress(10))
		f.n.restarts++
		f.during(cl.Restart)
	}
	f.until(f.progress(10))
	f.stop()
	errs := f.others
	for _, fl := range f.fails {
		errs = append(errs, fl.msg)
	}
	for _, msg := range errs {
		if !strings.HasPrefix(msg, "postgres: database ") {
			t.Errorf("%q: not the store's error naming the server", msg)
		}
	}
	f.check(db)
	f.log()
}
