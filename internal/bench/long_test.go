package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/store"
)

// longBase returns the sessions a long session is made of: the real ones
// where present, else synthetic ones of the same shape.
func longBase(tb testing.TB) ([]Session, string) {
	if dir := RealDir(); dir != "" {
		sessions, err := LoadReal(dir)
		if err != nil {
			tb.Fatal(err)
		}
		return sessions, "real"
	}
	return []Session{Synth("synth", 10_000, 11)}, "synth"
}

func longSizes() []int {
	if large() {
		return []int{6_000, 48_000, 100_000, 1_000_000}
	}
	return []int{6_000, 48_000, 100_000}
}

// longPolicies are the policies a long session is replayed under: every
// 40 events (`strata replay --every-events 40`), every 500 tokens
// (`--every-tokens 500`), and the default (`strata replay`).
var longPolicies = []struct {
	name   string
	policy compaction.Policy
}{
	{"every-events=40", LongPolicy},
	{"every-tokens=500", SizePolicy},
	{"default", compaction.DefaultPolicy},
}

// replayLong replays s into a new database at path as `strata replay
// --no-sync` does with policy (ReplayStrataWith's appends), and returns the
// compactions committed.
func replayLong(path string, s Session, policy compaction.Policy) (int, error) {
	p, err := OpenStrata(path, store.Options{NoSync: true})
	if err != nil {
		return 0, err
	}
	comp, err := compaction.NewCompactor(p.DB, compaction.Options{Summarizer: compaction.Extractive{}, Policy: policy})
	if err != nil {
		p.Close()
		return 0, err
	}
	committed := 0
	bg := comp.Background(context.Background(), func(_ string, rs []compaction.Result) {
		for _, r := range rs {
			if r.Committed() {
				committed++
			}
		}
	})
	for from := 0; from < len(s.Events); from += ReplayBatch {
		if _, err := bg.Append(s.ID, s.Events[from:min(from+ReplayBatch, len(s.Events))]...); err != nil {
			bg.Close()
			p.Close()
			return 0, err
		}
	}
	if err := bg.Close(); err != nil {
		p.Close()
		return 0, err
	}
	return committed, p.Close()
}

// BenchmarkReplayLong is the bulk replay of one long session — appends
// running ahead of compaction — at 6k, 48k and 100k events (1M with
// STRATA_BENCH_LARGE=1): the real sessions one after another, over and
// over (LongSession), compacted as `strata replay --no-sync` does under
// each of longPolicies. ns/event is what must stay flat as the session
// grows: a policy, plan or commit that read more than its span (the
// uncompacted tail, the history) would make it grow with n. cpu-ns/event
// is the same in CPU time (CPUTime: all goroutines, the collector's
// included), which a machine shared with other work does not inflate.
// ns/op and the allocations are per replay of the whole session.
func BenchmarkReplayLong(b *testing.B) {
	base, source := longBase(b)
	for _, lp := range longPolicies {
		for _, n := range longSizes() {
			s := LongSession("long", base, n)
			b.Run(fmt.Sprintf("%s/%s/events=%d", source, lp.name, n), func(b *testing.B) {
				b.ReportAllocs()
				cpu := CPUTime()
				for i := 0; i < b.N; i++ {
					if _, err := replayLong(filepath.Join(b.TempDir(), "long.db"), s, lp.policy); err != nil {
						b.Fatal(err)
					}
				}
				per := float64(b.N) * float64(len(s.Events))
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/event")
				b.ReportMetric(float64((CPUTime()-cpu).Nanoseconds())/per, "cpu-ns/event")
			})
		}
	}
}

// TestLongSession: a long session made of the base sessions replays and
// compacts as the benchmark's does, under each of its policies, leaving an
// uncompacted tail under each policy's bound, and the database verifies.
// It asserts no timing.
func TestLongSession(t *testing.T) {
	base, _ := longBase(t)
	s := LongSession("long", base, 3_000)
	if len(s.Events) < 2_900 || leavesOpen(s.Events) {
		t.Fatalf("%d events, open at the end: %v", len(s.Events), leavesOpen(s.Events))
	}
	for _, lp := range longPolicies {
		t.Run(lp.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "long.db")
			c, err := replayLong(path, s, lp.policy)
			if err != nil || c < 1 {
				t.Fatalf("replay: %d committed, %v", c, err)
			}
			db, err := store.Open(path, store.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			rep, err := db.Verify(store.VerifyOptions{})
			if err != nil || len(rep.Problems) > 0 {
				t.Fatalf("verify: %v %v", err, rep.Problems)
			}
			info, err := db.Info("long")
			if err != nil || info.Head != uint64(len(s.Events)) {
				t.Fatalf("info %+v, %v", info, err)
			}
			p := lp.policy
			if p.EveryEvents > 0 && info.Head-info.CompactedTo >= uint64(p.EveryEvents) ||
				p.EveryTokens > 0 && info.TailTokens >= p.EveryTokens {
				t.Errorf("%d committed; the tail left is %d events, %d tokens: over the policy %+v", c, info.Head-info.CompactedTo, info.TailTokens, p)
			}
		})
	}
}
