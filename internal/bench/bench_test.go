package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/store"
)

// large reports whether the 1M-event cases are asked for.
func large() bool { v, _ := strconv.ParseBool(os.Getenv("STRATA_BENCH_LARGE")); return v }

var appendPeers = []string{PeerStrata, PeerBolt, PeerSQLiteFull, PeerSQLiteNormal}

// BenchmarkAppend is scenario 1: durable append, one writer, one event per
// call. ns/op is per event.
func BenchmarkAppend(b *testing.B) {
	for _, name := range appendPeers {
		b.Run(name, func(b *testing.B) {
			p, err := OpenPeer(name, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			s := Synth("serial", b.N, 7)
			b.ReportAllocs()
			b.ResetTimer()
			if _, err := AppendSerial(p, s); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkAppendConcurrent is scenario 2: 64 sessions appending at once,
// one event per call. ns/op is per event, all sessions together.
func BenchmarkAppendConcurrent(b *testing.B) {
	for _, name := range append(appendPeers, PeerBoltBatch) {
		b.Run(name, func(b *testing.B) {
			p, err := OpenPeer(name, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			sessions := make([]Session, 64)
			for i := range sessions {
				sessions[i] = Synth(fmt.Sprintf("agent-%02d", i), (b.N+63)/64, uint64(100+i))
			}
			b.ReportAllocs()
			b.ResetTimer()
			if _, err := AppendConcurrent(p, sessions); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkReplayReal is scenario 3: the real sessions replayed, by strata
// with extractive compaction every 40 events (and under the default
// policy) and by bare bbolt without summaries. ns/op is per replay of all
// of them; cpu-ns/event the process's CPU time per event (what a loaded
// machine, where the disk's waits vary, still compares).
func BenchmarkReplayReal(b *testing.B) {
	sessions := realSessions(b)
	n := Count(sessions)
	cpu := func(b *testing.B) func() {
		start := CPUTime()
		return func() {
			b.ReportMetric(float64((CPUTime()-start).Nanoseconds())/float64(n*b.N), "cpu-ns/event")
		}
	}
	for _, pol := range []struct {
		name   string
		policy compaction.Policy
	}{{PeerStrata, ReplayPolicy}, {PeerStrata + " default policy", compaction.DefaultPolicy}} {
		b.Run(pol.name, func(b *testing.B) {
			b.ReportAllocs()
			defer cpu(b)()
			for i := 0; i < b.N; i++ {
				if _, _, err := ReplayStrataWith(filepath.Join(b.TempDir(), "strata.db"), sessions, store.Options{}, pol.policy); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run(PeerBolt, func(b *testing.B) {
		b.ReportAllocs()
		defer cpu(b)()
		for i := 0; i < b.N; i++ {
			p, err := OpenPeer(PeerBolt, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := ReplayPeer(p, sessions); err != nil {
				b.Fatal(err)
			}
			p.Close()
		}
	})
}

// realSessions returns the real sessions, or skips tb when they are
// absent.
func realSessions(tb testing.TB) []Session {
	dir := RealDir()
	if dir == "" {
		tb.Skip("../shared/data/real is absent")
	}
	sessions, err := LoadReal(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return sessions
}

func historySizes() []int {
	if large() {
		return []int{1_000, 100_000, 1_000_000}
	}
	return []int{1_000, 100_000}
}

// BenchmarkHistory is scenario 4: resume of the latest marker, and one L1
// compaction (plan + commit) of 40 new events, against 1k, 100k and (with
// STRATA_BENCH_LARGE=1) 1M events of history.
func BenchmarkHistory(b *testing.B) {
	for _, n := range historySizes() {
		for _, frame := range []string{"log", "bounded"} {
			benchmarkHistory(b, n, frame)
		}
	}
}

// benchmarkHistory is BenchmarkHistory at n events, with a frame of
// O(log n) roots (HistoryPolicy) or of at most BoundedRoots (BoundedPolicy).
func benchmarkHistory(b *testing.B, n int, frame string) {
	policy, maxRoots := HistoryPolicy, 0
	if frame == "bounded" {
		policy, maxRoots = BoundedPolicy, BoundedRoots
	}
	{
		path := filepath.Join(b.TempDir(), "history.db")
		if err := BuildHistoryWith(path, n, policy); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("resume/frame=%s/events=%d", frame, n), func(b *testing.B) {
			db, err := store.Open(path, store.Options{ReadOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := db.Resume("history", store.Latest); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("compact/frame=%s/events=%d", frame, n), func(b *testing.B) {
			b.ReportAllocs()
			// FlatCosts appends 40 events per round outside the timed
			// plan and commit; the benchmark times the whole round.
			if _, _, _, _, err := FlatCosts(path, b.N, maxRoots); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkAppendLedger is scenario 4's second half: the cost of one append
// (a call, its result, a rejection) against a ledger of 0, 10k and 100k
// open calls and as many dispositions. NoSync: the store's own work.
func BenchmarkAppendLedger(b *testing.B) {
	for _, n := range []int{0, 10_000, 100_000} {
		b.Run(fmt.Sprintf("ledger=2x%d", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "ledger.db")
			if err := BuildLedger(path, n); err != nil {
				b.Fatal(err)
			}
			db, err := store.Open(path, store.Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := db.Append("ledger", LedgerEvents(i)...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBackup is scenario 6: BackupFile against copying the file.
// SetBytes makes the MB/s comparable.
func BenchmarkBackup(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "history.db")
	if err := BuildHistory(path, 20_000); err != nil {
		b.Fatal(err)
	}
	size, _ := DiskUsage(path)
	b.Run("backup", func(b *testing.B) {
		db, err := store.Open(path, store.Options{ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		b.SetBytes(size)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := db.BackupFile(filepath.Join(dir, "backup.db")); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := CopyFile(path, filepath.Join(dir, "copy.db")); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestSmoke runs every scenario at a tiny size, so that the benchmarks and
// the table command keep working, and checks that every peer stores the
// same msgpack that strata stores. It asserts no timing.
func TestSmoke(t *testing.T) {
	dir := t.TempDir()
	s := Synth("smoke", 60, 3)
	sessions := []Session{Synth("a", 30, 4), Synth("b", 30, 5)}
	for _, name := range []string{PeerStrata, PeerBolt, PeerBoltBatch, PeerSQLiteFull, PeerSQLiteNormal} {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		p, err := OpenPeer(name, d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := AppendSerial(p, s); err != nil {
			t.Fatal(err)
		}
		if _, err := AppendConcurrent(p, sessions); err != nil {
			t.Fatal(err)
		}
		if _, err := ReplayPeer(p, []Session{Synth("replayed", 300, 6)}); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// The peers store what strata stores: strata's event records (less
	// boltfile's 5-byte trailer) equal the bench encoder's msgpack, Opener
	// aside (strata sets it; the peers do not track calls).
	sp := filepath.Join(dir, PeerStrata, "strata.db")
	en := NewEncoder()
	db, err := bolt.Open(sp, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = db.View(func(tx *bolt.Tx) error {
		// The events are in the session's bucket, keyed 0xFE, seq.
		l0 := tx.Bucket([]byte("s/smoke"))
		return l0.ForEach(func(k, v []byte) error {
			if len(k) != 9 || k[0] != 0xFE {
				return nil // the state and the session's buckets
			}
			payload := v[:len(v)-5]
			var rec eventRec
			if err := msgpack.Unmarshal(payload, &rec); err != nil {
				return err
			}
			e := s.Events[rec.Seq-1]
			e.Opener = rec.Opener
			if want := en.Encode(&e, rec.Seq); !bytes.Equal(want, payload) {
				t.Errorf("seq %d: strata stores %x, the peers %x", rec.Seq, payload, want)
			}
			n++
			return nil
		})
	})
	db.Close()
	if err != nil || n != len(s.Events) {
		t.Fatalf("compared %d events of %d: %v", n, len(s.Events), err)
	}

	// The other scenarios, tiny.
	if dir := RealDir(); dir != "" {
		real, err := LoadReal(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, c, err := ReplayStrata(filepath.Join(t.TempDir(), "real.db"), real[:min(5, len(real))]); err != nil || c == 0 {
			t.Fatalf("replay: %d committed, %v", c, err)
		}
	}
	hp := filepath.Join(t.TempDir(), "history.db")
	if err := BuildHistory(hp, 500); err != nil {
		t.Fatal(err)
	}
	if res, plan, commit, _, err := FlatCosts(hp, 2, 0); err != nil || len(res) != 2 || len(plan) != 2 || len(commit) != 2 {
		t.Fatalf("flat costs: %v", err)
	}
	bp := filepath.Join(t.TempDir(), "bounded.db")
	if err := BuildHistoryWith(bp, 500, BoundedPolicy); err != nil {
		t.Fatal(err)
	}
	sdb, err := store.Open(bp, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	info, err := sdb.Info("history")
	sdb.Close()
	if err != nil || info.Roots > BoundedRoots {
		t.Fatalf("bounded history: %d roots (%v)", info.Roots, err)
	}
	if _, _, _, digest, err := FlatCosts(bp, 8, BoundedRoots); err != nil || len(digest) == 0 {
		t.Fatalf("flat costs with digests: %d digests, %v", len(digest), err)
	}
	lp := filepath.Join(t.TempDir(), "ledger.db")
	if err := BuildLedger(lp, 50); err != nil {
		t.Fatal(err)
	}
	if _, err := CopyFile(hp, filepath.Join(t.TempDir(), "copy.db")); err != nil {
		t.Fatal(err)
	}
	if ps, used, err := BoltPages(hp); err != nil || ps == 0 || used == 0 {
		t.Fatalf("BoltPages: %d %d %v", ps, used, err)
	}
}
