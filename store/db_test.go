package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestClose_WhileAppending closes the database under running writers: every
// append acknowledged before Close is stored, every other one fails with
// ErrClosed and is not.
func TestClose_WhileAppending(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{NoSync: true})
	const writers = 16
	byWriter := make([][]ack, writers)
	var wg sync.WaitGroup
	// Close comes once every writer has an append acknowledged, while they
	// go on appending.
	var acked sync.WaitGroup
	acked.Add(writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if i == 1 {
					acked.Done()
				}
				text := fmt.Sprintf("w%d i%d", w, i)
				res, err := db.Append(fmt.Sprintf("s%d", w%4), tier.Event{Kind: tier.KindAssistant, Text: text})
				if errors.Is(err, store.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					if i == 0 {
						acked.Done()
					}
					return
				}
				byWriter[w] = append(byWriter[w], ack{session: fmt.Sprintf("s%d", w%4), res: res, texts: []string{text}})
			}
		}()
	}
	acked.Wait()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	ro, err := store.Open(db.Path(), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	n := 0
	for _, acks := range byWriter {
		n += len(acks)
	}
	if n == 0 {
		t.Fatal("no append was acknowledged before Close")
	}
	checkAcks(t, ro, byWriter)
}

var crashCycles = flag.Int("strata.crash-cycles", 40, "kill-and-reopen cycles of TestCrash_KillLoop (10 with -short)")

// Environment of the crash child: the database, and the seed of its
// events.
const (
	crashChildEnv = "STRATA_TEST_CRASH_CHILD_DB"
	crashSeedEnv  = "STRATA_TEST_CRASH_SEED"
)

// crashSessions are the sessions the child writes: two compacted by the
// extractive summarizer, one by a lossy one (so refusals, their
// checkpoints and audit records are written too).
var crashSessions = []string{"ext-a", "ext-b", "lossy"}

// eventDigest identifies what an appender gave: every field it set (the
// store assigns Seq, Turn and Opener).
func eventDigest(evs []tier.Event) string {
	h := sha256.New()
	for _, e := range evs {
		fmt.Fprintf(h, "%d|%d|%q|%q|%q|%v|%q|%q\n", e.Time, e.Kind, e.ID, e.Key, e.Name, e.Failed, e.By, e.Text)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// crashGen makes random valid events against a session's ledger.
type crashGen struct {
	rng  *rand.Rand
	l    *tier.Ledger
	tag  string
	n    int
	time int64
}

func (g *crashGen) pick(m []string) string { return m[g.rng.Intn(len(m))] }

func (g *crashGen) next() tier.Event {
	g.n++
	g.time++
	id := fmt.Sprintf("%s-%d", g.tag, g.n)
	text := strings.Repeat("lorem ", g.rng.Intn(40))
	var calls, handles, constr []string
	for k, o := range g.l.Open {
		if o.Kind == tier.KindToolCall {
			calls = append(calls, k)
		} else {
			handles = append(handles, k)
		}
	}
	for k := range g.l.Constraints {
		constr = append(constr, k)
	}
	slices.Sort(calls)
	slices.Sort(handles)
	slices.Sort(constr)
	e := tier.Event{Kind: tier.KindAssistant, Text: text, Time: g.time}
	switch r := g.rng.Intn(12); {
	case r == 0:
		e.Kind = tier.KindUser
	case r == 1 && len(calls) < 4:
		e.Kind, e.ID, e.Name = tier.KindToolCall, "call-"+id, "bash"
	case r == 2 && len(calls) > 0:
		e.Kind, e.ID = tier.KindToolResult, g.pick(calls)
		if g.rng.Intn(3) == 0 {
			e.Failed, e.Key = true, fmt.Sprintf("approach/%d", g.rng.Intn(5))
		}
	case r == 3 && len(handles) < 2:
		e.Kind, e.ID, e.Name = tier.KindOpen, "h-"+id, "file"
	case r == 4 && len(handles) > 0:
		e.Kind, e.ID = tier.KindClose, g.pick(handles)
	case r == 5:
		e.Kind, e.Key = tier.KindConstraint, fmt.Sprintf("rule/%d", g.rng.Intn(4))
	case r == 6 && len(constr) > 0:
		e.Kind, e.Key = tier.KindWithdrawn, g.pick(constr)
	case r == 7:
		e.Kind, e.Key = tier.KindRejected, fmt.Sprintf("idea/%d", g.rng.Intn(6))
	case r == 8:
		e.Kind, e.Key, e.By = tier.KindSuperseded, fmt.Sprintf("idea/%d", g.rng.Intn(6)), "idea/new"
	case r == 9:
		e.Kind, e.Key = tier.KindArtifact, fmt.Sprintf("out/%d.txt", g.rng.Intn(8))
	}
	if err := g.l.Apply(&e); err != nil {
		panic(err) // the generator's own bug
	}
	e.Opener = 0
	return e
}

// TestCrash_Child is not a test: it is the child process of
// TestCrash_KillLoop. It appends to and compacts its sessions until
// killed, printing "ack SESSION FIRST LAST DIGEST" after each Append
// returned.
func TestCrash_Child(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("helper process for TestCrash_KillLoop")
	}
	seed, _ := strconv.ParseInt(os.Getenv(crashSeedEnv), 10, 64)
	fail := func(err error) {
		fmt.Printf("error: %v\n", err)
		os.Exit(2)
	}
	db, err := store.Open(path, store.Options{Create: true, LockTimeout: 10 * time.Second})
	if err != nil {
		fail(err)
	}
	rng := rand.New(rand.NewSource(seed))
	lossy, _ := compaction.NewLossy(compaction.DropNegatives, compaction.DropArtifacts)
	policy := compaction.Policy{EveryEvents: 7, EveryTurns: 2, Fold: 2, Budget: 200}
	gens := map[string]*crashGen{}
	comps := map[string]*compaction.Compactor{}
	for i, s := range crashSessions {
		l := tier.NewLedger()
		var head uint64
		err := db.View(func(snap *store.Snapshot) error {
			info, err := snap.Info(s)
			if err != nil {
				return nil // a new session
			}
			head = info.Head
			l, err = snap.Ledger(s)
			return err
		})
		if err != nil {
			fail(err)
		}
		gens[s] = &crashGen{rng: rng, l: l, tag: fmt.Sprintf("%d-%d", seed, i), time: int64(seed)<<20 + int64(head)}
		var sum compaction.Summarizer = compaction.Extractive{}
		if s == "lossy" {
			sum = lossy
		}
		p := policy
		if i == 0 {
			p.MaxRoots = 2 // digests, killed midway too
		}
		if comps[s], err = compaction.NewCompactor(db, compaction.Options{Summarizer: sum, Policy: p}); err != nil {
			fail(err)
		}
	}
	fmt.Println("ready")
	ctx := context.Background()
	for {
		s := crashSessions[rng.Intn(len(crashSessions))]
		evs := make([]tier.Event, 1+rng.Intn(4))
		for i := range evs {
			evs[i] = gens[s].next()
		}
		res, err := db.Append(s, evs...)
		if err != nil {
			fail(err)
		}
		// One write of a short line: a pipe delivers it whole or not at all.
		os.Stdout.WriteString(fmt.Sprintf("ack %s %d %d %s\n", s, res.First, res.Last, eventDigest(evs)))
		if _, err := comps[s].Run(ctx, s); err != nil {
			fail(err)
		}
		if rng.Intn(20) == 0 {
			var roots []tier.Node
			_ = db.View(func(snap *store.Snapshot) (err error) { roots, err = snap.Roots(s); return err })
			if len(roots) > 0 {
				r := roots[rng.Intn(len(roots))]
				if _, err := comps[s].Recompact(ctx, s, r.ID, 60+rng.Intn(100)); err != nil && !isRefusal(err) {
					fail(err)
				}
			}
		}
	}
}

func isRefusal(err error) bool {
	var ie *marker.InvalidError
	return errors.As(err, &ie)
}

// crashAck is one acknowledged append.
type crashAck struct {
	session     string
	first, last uint64
	digest      string
}

// runCrashChild runs the child on path, kills it with SIGKILL after a
// random delay once it has opened the database (killChild), and returns
// the appends it acknowledged.
func runCrashChild(t *testing.T, path string, seed int64, rng *rand.Rand) (acks []crashAck, killedAfter time.Duration) {
	t.Helper()
	killedAfter = time.Duration(rng.Intn(400)) * time.Millisecond
	out := killChild(t, "TestCrash_Child", []string{crashChildEnv + "=" + path, crashSeedEnv + "=" + strconv.FormatInt(seed, 10)}, killedAfter)
	for _, l := range out {
		f := strings.Fields(l)
		switch {
		case l == "ready":
		case len(f) == 5 && f[0] == "ack":
			first, _ := strconv.ParseUint(f[2], 10, 64)
			last, _ := strconv.ParseUint(f[3], 10, 64)
			acks = append(acks, crashAck{session: f[1], first: first, last: last, digest: f[4]})
		default:
			t.Fatalf("crash child: %q", l)
		}
	}
	return acks, killedAfter
}

// TestCrash_KillLoop kills, with SIGKILL at random moments, a child
// process that appends to and compacts three sessions (extractive and lossy
// summarizers, folds, re-compactions), then reopens the database each time:
// it verifies clean; every append the child acknowledged is stored,
// unaltered, at the seqs it was given; every node has its marker and every
// marker its node; and resume gives the same bytes twice and after a
// reopen. -strata.crash-cycles=1000 runs the long version.
func TestCrash_KillLoop(t *testing.T) {
	t.Parallel()
	cycles := *crashCycles
	if testing.Short() {
		cycles = min(cycles, 10)
	}
	const perDB = 25 // a fresh database every perDB cycles keeps Verify fast
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	began := time.Now()
	var path string
	acked := map[string]map[uint64]crashAck{} // session → first seq → ack
	totalAcks, totalNodes, totalRefusals := 0, 0, 0
	var childTime, checkTime time.Duration
	for c := 0; c < cycles; c++ {
		if c%perDB == 0 {
			path = filepath.Join(dir, fmt.Sprintf("crash-%d.db", c/perDB))
			acked = map[string]map[uint64]crashAck{}
		}
		t0 := time.Now()
		acks, after := runCrashChild(t, path, seed+int64(c), rng)
		childTime += time.Since(t0)
		t0 = time.Now()
		for _, a := range acks {
			if acked[a.session] == nil {
				acked[a.session] = map[uint64]crashAck{}
			}
			acked[a.session][a.first] = a
		}
		totalAcks += len(acks)
		nodes, refusals := checkAfterCrash(t, path, acked)
		checkTime += time.Since(t0)
		if t.Failed() {
			t.Fatalf("cycle %d (child seed %d, killed %v after it opened the database, %d acks this cycle)", c, seed+int64(c), after, len(acks))
		}
		if c%perDB == perDB-1 || c == cycles-1 {
			totalNodes += nodes
			totalRefusals += refusals
		}
	}
	t.Logf("%d kill cycles in %v: %d acknowledged appends all present and unaltered, %d nodes (each with its marker), %d refusals, resume identical after every reopen",
		cycles, time.Since(began).Round(time.Millisecond), totalAcks, totalNodes, totalRefusals)
	t.Logf("time in the child %v, in the checks %v", childTime.Round(time.Millisecond), checkTime.Round(time.Millisecond))
}

// checkAfterCrash reopens path as a restarted process would and checks it.
func checkAfterCrash(t *testing.T, path string, acked map[string]map[uint64]crashAck) (nodes, refusals int) {
	t.Helper()
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatalf("reopen after the kill: %v", err)
	}
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	for _, p := range rep.Problems {
		t.Errorf("Verify: %s", p)
	}
	shas := map[string]string{}
	err = db.View(func(s *store.Snapshot) error {
		for session, acks := range acked {
			info, err := s.Info(session)
			if err != nil {
				return fmt.Errorf("session %q, acknowledged, is gone: %w", session, err)
			}
			var evs []tier.Event
			if err := s.Events(session, 1, info.Head, func(e tier.Event) error { evs = append(evs, e); return nil }); err != nil {
				return err
			}
			for _, a := range acks {
				if a.last > info.Head {
					t.Errorf("%q: acknowledged seqs %d..%d, head %d", session, a.first, a.last, info.Head)
					continue
				}
				if got := eventDigest(evs[a.first-1 : a.last]); got != a.digest {
					t.Errorf("%q: seqs %d..%d hold other events than the acknowledged append", session, a.first, a.last)
				}
			}
			nodeIDs, markerIDs := []uint64{}, []uint64{}
			if err := s.Nodes(session, func(n tier.Node) error { nodeIDs = append(nodeIDs, n.ID); return nil }); err != nil {
				return err
			}
			if err := s.Markers(session, func(m marker.Marker) error { markerIDs = append(markerIDs, m.Node); return nil }); err != nil {
				return err
			}
			if !slices.Equal(nodeIDs, markerIDs) {
				t.Errorf("%q: nodes %v, markers of nodes %v", session, nodeIDs, markerIDs)
			}
			nodes += len(nodeIDs)
			if err := s.Refusals(session, func(store.Refusal) error { refusals++; return nil }); err != nil {
				return err
			}
			// Latest, and a few markers: the first (long invalidated by
			// folds, so served by a checkpoint) and the newest.
			ids := []uint64{store.Latest}
			if n := len(markerIDs); n > 0 {
				ids = append(ids, markerIDs[0], markerIDs[n-1], markerIDs[n/2])
			}
			for _, id := range ids {
				a, err := s.Resume(session, id)
				if err != nil {
					return err
				}
				b, err := s.Resume(session, id)
				if err != nil {
					return err
				}
				if a.SHA256() != b.SHA256() {
					t.Errorf("%q: resume from marker %d differs between two calls", session, id)
				}
				shas[fmt.Sprintf("%s/%d", session, id)] = a.SHA256()
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("reading after the kill: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("reopen read-only: %v", err)
	}
	defer ro.Close()
	for k, want := range shas {
		i := strings.LastIndexByte(k, '/')
		id, _ := strconv.ParseUint(k[i+1:], 10, 64)
		ctx, err := ro.Resume(k[:i], id)
		if err != nil || ctx.SHA256() != want {
			t.Errorf("resume %s after a reopen: %v, sha differs: %v", k, err, err == nil)
		}
	}
	return nodes, refusals
}

// TestConcurrency_AgainstModel runs writers (each the only writer of its
// sessions) while compactors, resumers, backups and dumps run on the same
// database; under -race. Each session is checked against a sequential
// model — the events its writer appended, in order, and the ledger a
// replay of them gives — and every resumed context seen on the way covers
// its session's raw log exactly once (nodes up to the boundary, then raw
// events up to the head).
func TestConcurrency_AgainstModel(t *testing.T) {
	t.Parallel()
	const writers, perWriter = 8, 2
	appends := 40
	if testing.Short() {
		appends = 15
	}
	db := dbtest.Open(t, store.Options{NoSync: true})
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	model := make([][]tier.Event, writers*perWriter) // session i's events, in order
	session := func(i int) string { return fmt.Sprintf("m%02d", i) }

	var wg, bg sync.WaitGroup
	done := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed + int64(w)))
			gens := make([]*crashGen, perWriter)
			for j := range gens {
				gens[j] = &crashGen{rng: rng, l: tier.NewLedger(), tag: fmt.Sprintf("w%d-%d", w, j)}
			}
			for i := 0; i < appends; i++ {
				j := rng.Intn(perWriter)
				s := w*perWriter + j
				evs := make([]tier.Event, 1+rng.Intn(3))
				for k := range evs {
					evs[k] = gens[j].next()
				}
				res, err := db.Append(session(s), evs...)
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				if res.First != uint64(len(model[s])+1) {
					t.Errorf("%s: append landed at %d, the model's next seq is %d", session(s), res.First, len(model[s])+1)
				}
				model[s] = append(model[s], evs...)
			}
		}()
	}
	var ops [4]atomic.Int64 // compactions, resumes, backups, dumps
	loop := func(i int, fn func(rng *rand.Rand) error) {
		bg.Add(1)
		go func() {
			defer bg.Done()
			rng := rand.New(rand.NewSource(seed + 100 + int64(i)))
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := fn(rng); err != nil {
					t.Errorf("background op %d: %v", i, err)
					return
				}
				ops[i].Add(1)
			}
		}()
	}
	lossy, _ := compaction.NewLossy(compaction.DropArtifacts)
	for _, sum := range []compaction.Summarizer{compaction.Extractive{}, lossy} {
		c, err := compaction.NewCompactor(db, compaction.Options{Summarizer: sum, Policy: compaction.Policy{EveryEvents: 6, EveryTurns: 2, Fold: 2, MaxRoots: 3}})
		if err != nil {
			t.Fatal(err)
		}
		loop(0, func(rng *rand.Rand) error {
			s := session(rng.Intn(writers * perWriter))
			_, err := c.Run(context.Background(), s)
			if errors.Is(err, store.ErrSessionNotFound) || errors.Is(err, store.ErrConflict) {
				return nil
			}
			return err
		})
	}
	loop(1, func(rng *rand.Rand) error {
		s := session(rng.Intn(writers * perWriter))
		ctx, err := db.Resume(s, store.Latest)
		if errors.Is(err, store.ErrSessionNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return coversOnce(ctx)
	})
	if !dbtest.Postgres() { // a PostgreSQL store is no file to copy
		loop(2, func(*rand.Rand) error {
			var buf bytes.Buffer
			_, err := db.Backup(&buf)
			return err
		})
	}
	loop(3, func(*rand.Rand) error {
		_ = logicalState(t, db)
		return nil
	})
	wg.Wait()
	close(done)
	bg.Wait()
	t.Logf("%d writers × %d appends over %d sessions, with %d compaction runs, %d resumes, %d backups, %d dumps alongside",
		writers, appends, writers*perWriter, ops[0].Load(), ops[1].Load(), ops[2].Load(), ops[3].Load())
	if t.Failed() {
		return
	}
	for s, want := range model {
		st := state(t, db, session(s))
		if len(want) == 0 {
			continue
		}
		if uint64(len(want)) != st.Info.Head {
			t.Errorf("%s: head %d, the model has %d events", session(s), st.Info.Head, len(want))
			continue
		}
		if eventDigest(st.Events) != eventDigest(want) {
			t.Errorf("%s: the stored events differ from the model's", session(s))
		}
		l := tier.NewLedger()
		for i := range want {
			e := want[i]
			e.Seq = uint64(i + 1)
			if err := l.Apply(&e); err != nil {
				t.Fatalf("model replay: %v", err)
			}
		}
		if d := st.Ledger.Diff(l); len(d) != 0 {
			t.Errorf("%s: stored ledger differs from the model's: %v", session(s), d)
		}
		ctx, err := db.Resume(session(s), store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		if err := coversOnce(ctx); err != nil {
			t.Errorf("%s: %v", session(s), err)
		}
	}
}

// coversOnce checks that a resumed context's nodes cover 1..Boundary
// without gap or overlap and its raw events are Boundary+1..Head.
func coversOnce(ctx *checkpoint.Context) error {
	next := uint64(1)
	for _, n := range ctx.Nodes {
		if n.From != next {
			return fmt.Errorf("resume of %q: node %d covers %d..%d, expected to start at %d", ctx.Session, n.ID, n.From, n.To, next)
		}
		next = n.To + 1
	}
	if next != ctx.Boundary+1 {
		return fmt.Errorf("resume of %q: nodes end at %d, boundary %d", ctx.Session, next-1, ctx.Boundary)
	}
	for _, e := range ctx.Events {
		if e.Seq != next {
			return fmt.Errorf("resume of %q: raw seq %d where %d was expected", ctx.Session, e.Seq, next)
		}
		next++
	}
	if next != ctx.Head+1 {
		return fmt.Errorf("resume of %q: ends at %d, head %d", ctx.Session, next-1, ctx.Head)
	}
	return nil
}

// TestDB_DropEmpty: a database Open created (Created) that holds no
// session is removed by DropEmpty, its file gone; one that holds a session,
// or that this Open did not create, is kept.
func TestDB_DropEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	open := func(opts store.Options) *store.DB {
		t.Helper()
		opts.NoSync = true
		db, err := store.Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	exists := func() bool {
		_, err := os.Stat(path)
		return err == nil
	}

	db := open(store.Options{Create: true})
	if !db.Created() || db.Path() != path {
		t.Fatalf("a new file: Created %v, Path %q", db.Created(), db.Path())
	}
	if dropped, err := db.DropEmpty(); err != nil || !dropped {
		t.Fatalf("DropEmpty of a new empty database = %v, %v", dropped, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if exists() {
		t.Fatal("the dropped database's file is still there")
	}

	db = open(store.Options{Create: true})
	mustAppend(t, db, "s", ev("kept"))
	if dropped, err := db.DropEmpty(); err != nil || dropped {
		t.Fatalf("DropEmpty of a database holding a session = %v, %v", dropped, err)
	}
	db.Close()

	db = open(store.Options{Create: true})
	if db.Created() {
		t.Error("Open of an existing file says it created it")
	}
	if dropped, err := db.DropEmpty(); err != nil || dropped {
		t.Fatalf("DropEmpty of a database this Open did not create = %v, %v", dropped, err)
	}
	db.Close()
	if !exists() {
		t.Fatal("a database holding a session was removed")
	}
}
