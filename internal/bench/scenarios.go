package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"

	// The scenarios open bbolt files and PostgreSQL URLs.
	_ "github.com/strata-go/strata"
)

// AppendSerial appends s's events to p one per call, from one goroutine,
// and returns how long that took.
func AppendSerial(p Peer, s Session) (time.Duration, error) {
	start := time.Now()
	for i := range s.Events {
		if err := p.Append(s.ID, s.Events[i]); err != nil {
			return 0, fmt.Errorf("%s: append %d: %w", p.Name(), i, err)
		}
	}
	return time.Since(start), nil
}

// AppendConcurrent appends every session's events to p, one goroutine per
// session, one event per call, and returns how long until the last one
// was acknowledged.
func AppendConcurrent(p Peer, sessions []Session) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make([]error, len(sessions))
	start := time.Now()
	for i := range sessions {
		wg.Go(func() {
			s := &sessions[i]
			for j := range s.Events {
				if err := p.Append(s.ID, s.Events[j]); err != nil {
					errs[i] = fmt.Errorf("%s: session %s append %d: %w", p.Name(), s.ID, j, err)
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return d, err
		}
	}
	return d, nil
}

// ReplayBatch is how many consecutive events of a session one append
// carries in a bulk replay: what `strata replay` does.
const ReplayBatch = 256

// ReplayPolicy is the bulk replay's compaction: extractive, an L1 node
// every 40 events, folds of 4.
var ReplayPolicy = compaction.Policy{EveryEvents: 40, Fold: compaction.DefaultFold, Budget: compaction.DefaultBudget}

// SizePolicy compacts on size at a small budget: an L1 node per 500 tokens
// of tail (`--every-tokens 500`), folds of 4 — about every 4 events of the
// recorded sessions, ten times ReplayPolicy's compactions: what the size
// rule costs is measured under it.
var SizePolicy = compaction.Policy{EveryTokens: 500, Fold: compaction.DefaultFold, Budget: compaction.DefaultBudget}

// ReplayStrata loads sessions into a new strata database at path as
// `strata replay --every-events 40` does: appends of up to ReplayBatch
// events, each followed by the compactions it makes due, run in the
// background (compaction.Background) while the next session is appended. It returns the
// time taken and the number of compactions committed.
func ReplayStrata(path string, sessions []Session) (time.Duration, int, error) {
	return ReplayStrataWith(path, sessions, store.Options{}, ReplayPolicy)
}

// BackgroundRunsEnv names the environment variable that sets the replays'
// compaction.Options.BackgroundRuns (unset: the default): how the table of
// Runs at once in docs/performance.md is measured.
const BackgroundRunsEnv = "STRATA_BENCH_BACKGROUND_RUNS"

// ReplayStrataWith is ReplayStrata with opts, compacting under policy.
// path may be a postgres:// URL.
func ReplayStrataWith(path string, sessions []Session, opts store.Options, policy compaction.Policy) (time.Duration, int, error) {
	runs := 0
	if v := os.Getenv(BackgroundRunsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, 0, fmt.Errorf("%s=%q: want a count of Runs, 1 or more", BackgroundRunsEnv, v)
		}
		runs = n
	}
	p, err := OpenStrata(path, opts)
	if err != nil {
		return 0, 0, err
	}
	comp, err := compaction.NewCompactor(p.DB, compaction.Options{Summarizer: compaction.Extractive{}, Policy: policy, BackgroundRuns: runs})
	if err != nil {
		p.Close()
		return 0, 0, err
	}
	committed := 0
	start := time.Now()
	bg := comp.Background(context.Background(), func(_ string, rs []compaction.Result) {
		for _, r := range rs {
			if r.Committed() {
				committed++
			}
		}
	})
	for i := range sessions {
		s := &sessions[i]
		for from := 0; from < len(s.Events); from += ReplayBatch {
			if _, err := bg.Append(s.ID, s.Events[from:min(from+ReplayBatch, len(s.Events))]...); err != nil {
				bg.Close()
				return 0, 0, err
			}
		}
	}
	if err := bg.Close(); err != nil {
		return 0, 0, err
	}
	d := time.Since(start)
	return d, committed, p.Close()
}

// ReplayPeer loads sessions into p in the same batches as ReplayStrata,
// without summaries.
func ReplayPeer(p Peer, sessions []Session) (time.Duration, error) {
	return LoadPeer(p, sessions, ReplayBatch)
}

// LoadPeer loads sessions into p, each in appends of up to batch
// consecutive events, and returns the time taken.
func LoadPeer(p Peer, sessions []Session, batch int) (time.Duration, error) {
	start := time.Now()
	for i := range sessions {
		s := &sessions[i]
		for from := 0; from < len(s.Events); from += batch {
			if err := p.Append(s.ID, s.Events[from:min(from+batch, len(s.Events))]...); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start), nil
}

// HistoryPolicy is the compaction a long history is built with: an L1
// node every 40 events, folds of 4 (so the frame holds O(log n) roots).
var HistoryPolicy = compaction.Policy{EveryEvents: 40, Fold: compaction.DefaultFold, Budget: compaction.DefaultBudget}

// BoundedPolicy is HistoryPolicy with digests: at most BoundedRoots roots.
var BoundedPolicy = compaction.Policy{EveryEvents: 40, Fold: compaction.DefaultFold, MaxRoots: BoundedRoots, Budget: compaction.DefaultBudget}

// BoundedRoots is BoundedPolicy's MaxRoots.
const BoundedRoots = 4

// BuildHistory creates a strata database at path holding one session,
// "history", of n synthetic events compacted under HistoryPolicy. It is a
// bulk load (NoSync, appends of 1,000 events, one fsync at the end).
func BuildHistory(path string, n int) error { return BuildHistoryWith(path, n, HistoryPolicy) }

// BuildHistoryWith is BuildHistory under policy. path may be a
// postgres:// URL: the load then runs with synchronous_commit off, and
// its last commit is flushed by the server's next checkpoint or flush.
func BuildHistoryWith(path string, n int, policy compaction.Policy) error {
	p, err := OpenStrata(path, store.Options{NoSync: true})
	if err != nil {
		return err
	}
	comp, err := compaction.NewCompactor(p.DB, compaction.Options{Summarizer: compaction.Extractive{}, Policy: policy})
	if err != nil {
		return err
	}
	s := Synth("history", n, 1)
	for from := 0; from < n; from += 1000 {
		if err := p.Append(s.ID, s.Events[from:min(from+1000, n)]...); err != nil {
			return err
		}
		if _, err := comp.Run(context.Background(), s.ID); err != nil {
			return err
		}
	}
	if err := p.Close(); err != nil || postgres.IsURL(path) {
		return err
	}
	return syncFile(path)
}

// syncFile fsyncs the file at path: what a bulk load under NoSync does
// once at the end.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Latencies holds the per-operation times of a repeated measurement.
type Latencies []time.Duration

// Median returns the median.
func (l Latencies) Median() time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[len(s)/2]
}

// FlatCosts measures, on the history database at path (durable opens: one
// fsync'd commit per call), k resumes of the latest marker and k rounds
// of: one append of 40 new events, then one L1 compaction of them — its
// plan, and its commit — and, with maxRoots > 0, the digests that bring
// the frame back to maxRoots roots (plan and commit, each). The history
// grows by 40k events.
func FlatCosts(path string, k, maxRoots int) (resume, plan, commit, digest Latencies, err error) {
	db, err := store.Open(path, store.Options{})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	info, err := db.Info("history")
	if err != nil {
		return nil, nil, nil, nil, err
	}
	// New events: their own call ids, their turns after the history's.
	more := Synth("history", 40*k, 2).Events
	for i := range more {
		more[i].Turn += info.Turn
		if more[i].ID != "" {
			more[i].ID = "more_" + more[i].ID
		}
	}
	ctx := context.Background()
	sum := compaction.Extractive{}
	for i := 0; i < k; i++ {
		t0 := time.Now()
		if _, err := db.Resume("history", store.Latest); err != nil {
			return nil, nil, nil, nil, err
		}
		resume = append(resume, time.Since(t0))
	}
	summarize := func(p *store.Plan) (store.Summary, error) {
		out, err := sum.Summarize(ctx, compaction.NewInput(p, 0, nil))
		return store.Summary{Narrative: out.Narrative, Claims: out.Claims, Summarizer: sum.Name()}, err
	}
	for i := 0; i < k; i++ {
		if _, err := db.Append("history", more[i*40:(i+1)*40]...); err != nil {
			return nil, nil, nil, nil, err
		}
		t0 := time.Now()
		pl, err := compaction.Policy{EveryEvents: 40}.PlanSpan(db, "history")
		if err != nil {
			return nil, nil, nil, nil, err
		}
		t1 := time.Now()
		s, err := summarize(pl)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		t2 := time.Now()
		if _, err := db.Commit(pl, s); err != nil {
			return nil, nil, nil, nil, err
		}
		plan = append(plan, t1.Sub(t0))
		commit = append(commit, time.Since(t2))
		for maxRoots > 0 {
			t0 := time.Now()
			d, err := compaction.Policy{MaxRoots: maxRoots}.PlanDigest(db, "history")
			if errors.Is(err, store.ErrNothingToCompact) {
				break
			}
			if err != nil {
				return nil, nil, nil, nil, err
			}
			s, err := summarize(d)
			if err != nil {
				return nil, nil, nil, nil, err
			}
			if _, err := db.Commit(d, s); err != nil {
				return nil, nil, nil, nil, err
			}
			digest = append(digest, time.Since(t0))
		}
	}
	return resume, plan, commit, digest, nil
}

// BuildLedger creates a strata database at path with one session,
// "ledger", whose ledger holds n open calls and n dispositions.
func BuildLedger(path string, n int) error {
	p, err := OpenStrata(path, store.Options{NoSync: true})
	if err != nil {
		return err
	}
	batch := make([]tier.Event, 0, 2000)
	for i := 0; i < n; i++ {
		batch = append(batch,
			tier.Event{Kind: tier.KindToolCall, ID: fmt.Sprintf("open_%d", i), Name: "bash", Text: "sleep 1000"},
			tier.Event{Kind: tier.KindRejected, Key: fmt.Sprintf("approach/%d", i), Text: "it failed"})
		if len(batch) == cap(batch) || i == n-1 {
			if err := p.Append("ledger", batch...); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if n == 0 {
		if err := p.Append("ledger", tier.Event{Kind: tier.KindUser, Text: "hello"}); err != nil {
			return err
		}
	}
	if err := p.Close(); err != nil {
		return err
	}
	return syncFile(path)
}

// LedgerEvents returns the i-th event of the append-cost probe: a call,
// its result, a rejection of a new key — each touches the ledger.
func LedgerEvents(i int) []tier.Event {
	id := fmt.Sprintf("probe_%d", i)
	return []tier.Event{
		{Kind: tier.KindToolCall, ID: id, Name: "bash", Text: "ls"},
		{Kind: tier.KindToolResult, ID: id, Text: "ok"},
		{Kind: tier.KindRejected, Key: "probe/" + id, Text: "no"},
	}
}

// CopyFile copies src to dst as a careful `cp` would: io.Copy (which uses
// copy_file_range on Linux), fsync. It returns the bytes copied.
func CopyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// DiskUsage returns the bytes the file at path occupies: its size, and the
// blocks allocated to it (a bbolt file grows ahead of its data, sparsely).
func DiskUsage(path string) (size, allocated int64) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0
	}
	return fi.Size(), blocks(fi)
}

// TempDir returns a new directory under dir ("" = the system's).
func TempDir(dir, pattern string) (string, error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
	}
	return os.MkdirTemp(dir, pattern)
}

// Join is filepath.Join, for the table command.
func Join(elem ...string) string { return filepath.Join(elem...) }
