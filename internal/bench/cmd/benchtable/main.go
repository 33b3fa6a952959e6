// Command benchtable measures strata against bare bbolt and SQLite in one
// run and prints the comparison as markdown tables, each ratio against a
// peer measured in the same run:
//
//	go run ./internal/bench/cmd/benchtable [-large] [-dir DIR] [-only LIST]
//
// -large adds 1M events of history and a dump of a 1 GB database (tens of
// minutes, several GB of disk). See package bench for what each peer is.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/bench"
	"github.com/strata-go/strata/store"
)

var (
	flagDir     = flag.String("dir", "", "where to put the databases (default: a new directory under $TMPDIR, removed at the end)")
	flagLarge   = flag.Bool("large", false, "add the 1M-event history and the 1 GB dump")
	flagOnly    = flag.String("only", "", "run only these sections, comma-separated: append,concurrent,replay,flat,ledger,size,backup,dump")
	flagRounds  = flag.Int("rounds", 3, "rounds of the append scenarios (the median is reported)")
	flagSerial  = flag.Int("serial", 400, "events of the one-writer append scenario")
	flagPerSess = flag.Int("concurrent", 40, "events per session of the 64-session scenario")
	flagCPU     = flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	flagKeep    = flag.Bool("keep", false, "keep the databases")
	// flagResume makes the process a child of the flat section: open the
	// database, resume its session, exit — what an agent's process pays
	// to start from a database.
	flagResume = flag.String("resume-child", "", "(internal) open this database, resume session \"history\" and exit")
)

func main() {
	flag.Parse()
	if *flagResume != "" {
		db, err := store.Open(*flagResume, store.Options{ReadOnly: true})
		check(err)
		_, err = db.Resume("history", store.Latest)
		check(err)
		check(db.Close())
		return
	}
	if *flagCPU != "" {
		f, err := os.Create(*flagCPU)
		check(err)
		check(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}
	dir, err := bench.TempDir(*flagDir, "strata-bench-")
	check(err)
	if !*flagKeep {
		defer os.RemoveAll(dir)
	}
	fmt.Printf("# strata performance, measured %s\n\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Printf("Machine: %d cores, %s/%s, %s; databases in %s. fsync cost: %s per fdatasync of 4 KiB.\n\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), dir, fsyncCost(dir))
	run := func(name string, fn func(dir string)) {
		if *flagOnly != "" && !strings.Contains(","+*flagOnly+",", ","+name+",") {
			return
		}
		sub := filepath.Join(dir, name)
		check(os.MkdirAll(sub, 0o755))
		fn(sub)
		if !*flagKeep {
			os.RemoveAll(sub)
		}
	}
	run("append", appendSerial)
	run("concurrent", appendConcurrent)
	run("replay", replay)
	run("flat", flat)
	run("ledger", ledger)
	run("size", size)
	run("backup", backup)
	run("dump", dump)
}

// processResume returns the median, over rounds, of a whole process that
// opens path and resumes its session (this command, -resume-child): the
// page cache is warm after the first.
func processResume(path string, rounds int) time.Duration {
	var ds []float64
	for range rounds {
		t := time.Now()
		out, err := exec.Command(os.Args[0], "-resume-child", path).CombinedOutput()
		if err != nil {
			check(fmt.Errorf("resume child: %v: %s", err, out))
		}
		ds = append(ds, float64(time.Since(t)))
	}
	return time.Duration(median(ds))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

// fsyncCost times fdatasync of a 4 KiB overwrite, the median of 50.
func fsyncCost(dir string) time.Duration {
	f, err := os.Create(filepath.Join(dir, "fsync-probe"))
	check(err)
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	var l bench.Latencies
	for i := 0; i < 50; i++ {
		_, err := f.WriteAt(buf, 0)
		check(err)
		t := time.Now()
		check(f.Sync())
		l = append(l, time.Since(t))
	}
	return l.Median().Round(time.Microsecond)
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// medianRate runs fn rounds times per peer, peers interleaved so that
// drifts of the disk hit every peer alike, and returns each peer's median
// events/s.
func medianRate(dir string, peers []string, rounds int, n int, fn func(p bench.Peer) (time.Duration, error)) map[string]float64 {
	rates := map[string][]float64{}
	for r := 0; r < rounds; r++ {
		// Each round starts with another peer, and each peer after a
		// sync(2): a peer that leaves dirty pages behind (SQLite NORMAL
		// syncs only at checkpoints) must not slow the fsyncs of the next.
		for i := range peers {
			name := peers[(r+i)%len(peers)]
			d := filepath.Join(dir, fmt.Sprintf("%d-%s", r, strings.ReplaceAll(name, " ", "_")))
			check(os.MkdirAll(d, 0o755))
			p, err := bench.OpenPeer(name, d)
			check(err)
			syncDisks()
			took, err := fn(p)
			check(err)
			check(p.Close())
			rates[name] = append(rates[name], rate(n, took))
			os.RemoveAll(d)
		}
	}
	out := map[string]float64{}
	for name, rs := range rates {
		out[name] = median(rs)
	}
	return out
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func appendSerial(dir string) {
	n := *flagSerial
	s := bench.Synth("serial", n, 7)
	peers := []string{bench.PeerStrata, bench.PeerBolt, bench.PeerSQLiteFull, bench.PeerSQLiteNormal}
	r := medianRate(dir, peers, *flagRounds, n, func(p bench.Peer) (time.Duration, error) { return bench.AppendSerial(p, s) })
	fmt.Printf("## 1. Durable append, one writer, one event per call (%d events, median of %d rounds)\n\n", n, *flagRounds)
	fmt.Println("| peer | events/s | µs/event | strata ÷ peer |")
	fmt.Println("|---|---:|---:|---:|")
	for _, name := range peers {
		fmt.Printf("| %s | %.0f | %.0f | %.2f |\n", name, r[name], 1e6/r[name], r[bench.PeerStrata]/r[name])
	}
	ratio := r[bench.PeerStrata] / r[bench.PeerBolt]
	fmt.Printf("\nTarget strata ÷ bare bbolt ≥ 0.95: %.2f, %s.\n\n", ratio, verdict(ratio >= 0.95))
}

func appendConcurrent(dir string) {
	per := *flagPerSess
	sessions := make([]bench.Session, 64)
	for i := range sessions {
		sessions[i] = bench.Synth(fmt.Sprintf("agent-%02d", i), per, uint64(100+i))
	}
	n := bench.Count(sessions)
	peers := []string{bench.PeerStrata, bench.PeerBolt, bench.PeerBoltBatch, bench.PeerSQLiteFull, bench.PeerSQLiteNormal}
	r := medianRate(dir, peers, *flagRounds, n, func(p bench.Peer) (time.Duration, error) { return bench.AppendConcurrent(p, sessions) })
	fmt.Printf("## 2. Durable append from 64 concurrent sessions, one event per call (%d events, median of %d rounds)\n\n", n, *flagRounds)
	fmt.Println("| peer | events/s | strata ÷ peer |")
	fmt.Println("|---|---:|---:|")
	for _, name := range peers {
		fmt.Printf("| %s | %.0f | %.2f |\n", name, r[name], r[bench.PeerStrata]/r[name])
	}
	ratio := r[bench.PeerStrata] / r[bench.PeerSQLiteFull]
	fmt.Printf("\nTarget strata ÷ SQLite WAL FULL ≥ 5: %.1f, %s.\n\n", ratio, verdict(ratio >= 5))
}

func replay(dir string) {
	rd := bench.RealDir()
	fmt.Printf("## 3. Bulk replay of the real sessions, extractive compaction\n\n")
	if rd == "" {
		fmt.Printf("../shared/data/real is absent: skipped.\n\n")
		return
	}
	sessions, err := bench.LoadReal(rd)
	check(err)
	n := bench.Count(sessions)
	policies := []struct {
		name   string
		policy compaction.Policy
		target float64
	}{
		{"strata, every 40 events", bench.ReplayPolicy, 0.7},
		{"strata, the default policy", compaction.DefaultPolicy, 0.8},
	}
	rates := make([][]float64, len(policies))
	committed := make([]int, len(policies))
	var bt, qt []float64
	for r := 0; r < *flagRounds; r++ {
		for i, p := range policies {
			d, c, err := bench.ReplayStrataWith(filepath.Join(dir, fmt.Sprintf("strata-%d-%d.db", r, i)), sessions, store.Options{}, p.policy)
			check(err)
			rates[i], committed[i] = append(rates[i], rate(n, d)), c
		}
		for _, name := range []string{bench.PeerBolt, bench.PeerSQLiteFull} {
			pd := filepath.Join(dir, fmt.Sprintf("%d-%s", r, strings.ReplaceAll(name, " ", "_")))
			check(os.MkdirAll(pd, 0o755))
			p, err := bench.OpenPeer(name, pd)
			check(err)
			d, err := bench.ReplayPeer(p, sessions)
			check(err)
			check(p.Close())
			if name == bench.PeerBolt {
				bt = append(bt, rate(n, d))
			} else {
				qt = append(qt, rate(n, d))
			}
		}
	}
	b, q := median(bt), median(qt)
	fmt.Printf("%d sessions, %d events, appended in runs of ≤%d events of a session (as `strata replay`); strata also commits summary nodes, compacting on a second goroutine whose commits share the appends' transactions where they meet: every 40 events (`--every-tokens 0 --every-events 40`), and under the default policy (`compaction.DefaultPolicy`: a resumed context within a quarter of a 200k window). Median of %d rounds.\n\n",
		len(sessions), n, bench.ReplayBatch, *flagRounds)
	fmt.Println("| peer | events/s | compactions | strata ÷ bare bbolt | strata ÷ SQLite |")
	fmt.Println("|---|---:|---:|---:|---:|")
	for i, p := range policies {
		s := median(rates[i])
		fmt.Printf("| %s | %.0f | %d | %.2f | %.2f |\n", p.name, s, committed[i], s/b, s/q)
	}
	fmt.Printf("| bare bbolt (events only) | %.0f | | 1.00 | |\n", b)
	fmt.Printf("| SQLite WAL FULL (events only) | %.0f | | | 1.00 |\n", q)
	fmt.Println()
	for i, p := range policies {
		ratio := median(rates[i]) / b
		fmt.Printf("Target %s ÷ bare bbolt ≥ %.1f: %.2f, %s.\n", p.name, p.target, ratio, verdict(ratio >= p.target))
	}
	fmt.Println()
}

func flat(dir string) {
	sizes := []int{1_000, 100_000}
	if *flagLarge {
		sizes = append(sizes, 1_000_000)
	}
	fmt.Printf("## 4. Flat costs: resume and compaction at growing history\n\n")
	fmt.Printf("One session of synthetic events (bounded key pools: the state the log implies stays bounded), compacted every 40 events with folds of 4: the frame holds O(log n) roots; with `--max-roots %d` (digests), at most %d. Median of 20; durable commits.\n\n", bench.BoundedRoots, bench.BoundedRoots)
	fmt.Println("| frame | history (events) | build | size | process: open + resume | first resume after open | resume latest | resumed context | L1 plan | L1 commit | digest |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	var verdicts []string
	for _, frame := range []string{"O(log n)", "bounded"} {
		policy, maxRoots := bench.HistoryPolicy, 0
		if frame == "bounded" {
			policy, maxRoots = bench.BoundedPolicy, bench.BoundedRoots
		}
		var first, last [3]time.Duration
		var firstProc, lastProc time.Duration
		for i, n := range sizes {
			path := filepath.Join(dir, fmt.Sprintf("history-%d.db", n))
			t := time.Now()
			check(bench.BuildHistoryWith(path, n, policy))
			build := time.Since(t)
			size, _ := bench.DiskUsage(path)
			proc := processResume(path, 11)
			if i == 0 {
				firstProc = proc
			}
			lastProc = proc
			// Open and first resume in this process, page cache warm.
			t = time.Now()
			db, err := store.Open(path, store.Options{ReadOnly: true})
			check(err)
			rc, err := db.Resume("history", store.Latest)
			check(err)
			firstResume := time.Since(t)
			info, err := db.Info("history")
			check(err)
			roots, ctxKiB := info.Roots, float64(len(rc.Text()))/1024
			check(db.Close())
			res, plan, commit, digest, err := bench.FlatCosts(path, 20, maxRoots)
			check(err)
			cur := [3]time.Duration{res.Median(), plan.Median(), commit.Median()}
			if i == 0 {
				first = cur
			}
			last = cur
			dig := "–"
			if len(digest) > 0 {
				dig = digest.Median().Round(time.Microsecond).String()
			}
			fmt.Printf("| %s | %d | %s | %.0f MB | %s | %s | %s | %.0f KiB, %d roots | %s | %s | %s |\n", frame, n, build.Round(time.Millisecond), float64(size)/1e6,
				proc.Round(time.Microsecond), firstResume.Round(time.Microsecond), cur[0].Round(time.Microsecond),
				ctxKiB, roots, cur[1].Round(time.Microsecond), cur[2].Round(time.Microsecond), dig)
			os.Remove(path)
		}
		r0 := float64(last[0]) / float64(first[0])
		r2 := float64(last[2]) / float64(first[2])
		rp := float64(lastProc) / float64(firstProc)
		verdicts = append(verdicts, fmt.Sprintf("%s frame: process open + resume %.2f, %s; resume %.2f, %s; compaction commit %.2f, %s",
			frame, rp, verdict(rp <= 1.5), r0, verdict(r0 <= 1.5), r2, verdict(r2 <= 1.5)))
	}
	fmt.Printf("\nTarget (largest ÷ 1k) ≤ 1.5: %s.\n\n", strings.Join(verdicts, "; "))
}

func ledger(dir string) {
	fmt.Printf("## 4b. Append cost against the size of the ledger\n\n")
	fmt.Printf("One append of 3 events (a call, its result, a rejection) to a session whose ledger holds n open calls and n dispositions. Median of 200; NoSync, so that the fsync (the same for all) does not hide the store's own work.\n\n")
	fmt.Println("| open calls + dispositions | µs/append | allocs/append |")
	fmt.Println("|---:|---:|---:|")
	for _, n := range []int{0, 10_000, 100_000} {
		path := filepath.Join(dir, fmt.Sprintf("ledger-%d.db", n))
		check(bench.BuildLedger(path, n))
		db, err := store.Open(path, store.Options{NoSync: true})
		check(err)
		var l bench.Latencies
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		for i := 0; i < 200; i++ {
			t := time.Now()
			_, err := db.Append("ledger", bench.LedgerEvents(i)...)
			check(err)
			l = append(l, time.Since(t))
		}
		runtime.ReadMemStats(&ms)
		check(db.Close())
		fmt.Printf("| 2 × %d | %.0f | %d |\n", n, float64(l.Median().Microseconds()), (ms.Mallocs-before)/200)
		os.Remove(path)
	}
	fmt.Println()
}

func size(dir string) {
	points := []int{1_000, 10_000, 100_000}
	if *flagLarge {
		points = append(points, 1_000_000)
	}
	fmt.Printf("## 5. Size on disk per raw event\n\n")
	fmt.Printf("Synthetic events appended one per call, round-robin over 16 sessions (NoSync: the layout is the same as with fsync). \"msgpack\" is the event's msgpack as every peer stores it; \"used\" is bbolt's high-water mark, \"file\" the file's size (bbolt grows it ahead of the data: to the next power of two below 16 MiB, then 16 MiB ahead).\n\n")
	fmt.Println("| events | msgpack B/event | strata used B/event | ÷ msgpack | strata file B/event | bare bbolt used B/event | SQLite B/event |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|")
	var worst float64
	var usedAt, msgAt []float64 // per point: bytes used, msgpack bytes
	for _, n := range points {
		sessions := make([]bench.Session, 16)
		for i := range sessions {
			sessions[i] = bench.Synth(fmt.Sprintf("s%02d", i), n/16, uint64(i))
		}
		mp := float64(bench.MsgpackBytes(sessions)) / float64(n)
		sp := filepath.Join(dir, fmt.Sprintf("strata-%d.db", n))
		p, err := bench.OpenStrata(sp, store.Options{NoSync: true})
		check(err)
		roundRobin(p, sessions)
		check(p.Close())
		_, used, err := bench.BoltPages(sp)
		check(err)
		fsize, _ := bench.DiskUsage(sp)
		bd := filepath.Join(dir, fmt.Sprintf("bolt-%d", n))
		check(os.MkdirAll(bd, 0o755))
		bp, err := bench.OpenPeerNoSync(bench.PeerBolt, bd)
		check(err)
		roundRobin(bp, sessions)
		check(bp.Close())
		_, bused, err := bench.BoltPages(filepath.Join(bd, "bolt.db"))
		check(err)
		qd := filepath.Join(dir, fmt.Sprintf("sqlite-%d", n))
		check(os.MkdirAll(qd, 0o755))
		qp, err := bench.OpenPeerNoSync(bench.PeerSQLiteNormal, qd)
		check(err)
		roundRobin(qp, sessions)
		check(qp.Close())
		qsize := bench.FileBytes(filepath.Join(qd, "sqlite.db"))
		ratio := float64(used) / float64(n) / mp
		worst = max(worst, ratio)
		usedAt, msgAt = append(usedAt, float64(used)), append(msgAt, mp*float64(n))
		fmt.Printf("| %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.0f |\n", n, mp, float64(used)/float64(n), ratio,
			float64(fsize)/float64(n), float64(bused)/float64(n), float64(qsize)/float64(n))
		os.Remove(sp)
		os.RemoveAll(bd)
		os.RemoveAll(qd)
	}
	k := len(points) - 1
	last := usedAt[k] / msgAt[k]
	marginal := (usedAt[k] - usedAt[k-1]) / (msgAt[k] - msgAt[k-1])
	fmt.Printf("\nTarget used ÷ msgpack ≤ 1.3 per raw event: %.2f at %d events, %s; per added event from %d to %d events %.2f (linear growth); %.2f at %d events, where each session's fixed buckets weigh on few events.\n\n",
		last, points[k], verdict(last <= 1.3), points[k-1], points[k], marginal, worst, points[0])
	if rd := bench.RealDir(); rd != "" {
		sessions, err := bench.LoadReal(rd)
		check(err)
		n := bench.Count(sessions)
		mp := float64(bench.MsgpackBytes(sessions)) / float64(n)
		sp := filepath.Join(dir, "real.db")
		_, _, err = bench.ReplayStrata(sp, sessions)
		check(err)
		_, used, err := bench.BoltPages(sp)
		check(err)
		fsize, _ := bench.DiskUsage(sp)
		fmt.Printf("The real sessions (%d sessions, %d events, %.0f B of msgpack per event), replayed with compaction every 40 events: %.0f B/event used (%.2f × msgpack, summaries, checkpoints and the ledger included), file %.1f MiB.\n\n",
			len(sessions), n, mp, float64(used)/float64(n), float64(used)/float64(n)/mp, float64(fsize)/(1<<20))
	}
}

func roundRobin(p bench.Peer, sessions []bench.Session) {
	for j := 0; ; j++ {
		any := false
		for i := range sessions {
			if j < len(sessions[i].Events) {
				check(p.Append(sessions[i].ID, sessions[i].Events[j]))
				any = true
			}
		}
		if !any {
			return
		}
	}
}

func backup(dir string) {
	n := 200_000
	fmt.Printf("## 6. Backup against copying the file\n\n")
	path := filepath.Join(dir, "history.db")
	check(bench.BuildHistory(path, n))
	size, _ := bench.DiskUsage(path)
	var bk, cp []float64
	for r := 0; r < 5; r++ {
		db, err := store.Open(path, store.Options{ReadOnly: true})
		check(err)
		t := time.Now()
		w, err := db.BackupFile(filepath.Join(dir, "backup.db"))
		check(err)
		bk = append(bk, float64(w)/time.Since(t).Seconds())
		check(db.Close())
		t = time.Now()
		c, err := bench.CopyFile(path, filepath.Join(dir, "copy.db"))
		check(err)
		cp = append(cp, float64(c)/time.Since(t).Seconds())
	}
	b, c := median(bk), median(cp)
	fmt.Printf("A %.0f MiB database (%d events of history). Both write and fsync a new file; median of 5, page cache warm.\n\n", float64(size)/(1<<20), n)
	fmt.Println("| | MiB/s |")
	fmt.Println("|---|---:|")
	fmt.Printf("| `store.DB.BackupFile` | %.0f |\n| copy the file (io.Copy + fsync) | %.0f |\n", b/(1<<20), c/(1<<20))
	fmt.Printf("\nTarget backup ÷ copy ≥ 0.8: %.2f, %s.\n\n", b/c, verdict(b/c >= 0.8))
}

func dump(dir string) {
	fmt.Printf("## 6b. dump --json and verify of a large database\n\n")
	n := 100_000
	if *flagLarge {
		n = 1_600_000
	}
	exe := filepath.Join(dir, "strata")
	build := exec.Command("go", "build", "-o", exe, "github.com/strata-go/strata/cmd/strata")
	build.Stderr = os.Stderr
	check(build.Run())
	path := filepath.Join(dir, "big.db")
	t := time.Now()
	check(bench.BuildHistory(path, n))
	size, _ := bench.DiskUsage(path)
	fmt.Printf("%d events of history, %.0f MiB, built in %s.\n\n", n, float64(size)/(1<<20), time.Since(t).Round(time.Second))
	fmt.Println("| command | wall | max RSS | output |")
	fmt.Println("|---|---:|---:|---:|")
	for _, args := range [][]string{{"dump", "--json", path}, {"dump", "--json", "--raw", path}, {"verify", path}} {
		// /usr/bin/time reports the command's own peak RSS; rusage of a
		// child started from this (large) process can count ours.
		timeOut := filepath.Join(dir, "time.out")
		cmd := exec.Command(exe, args...)
		if _, err := os.Stat("/usr/bin/time"); err == nil {
			cmd = exec.Command("/usr/bin/time", append([]string{"-f", "%M", "-o", timeOut, exe}, args...)...)
		}
		var out countWriter
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		t := time.Now()
		err := cmd.Run()
		wall := time.Since(t)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%v: %v\n%s", args, err, errb.String())
		}
		rss := maxRSS(cmd.ProcessState)
		if b, err := os.ReadFile(timeOut); err == nil {
			if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
				rss = v
			}
		}
		fmt.Printf("| strata %s | %s | %.0f MiB | %.0f MiB |\n", strings.Join(args[:len(args)-1], " "), wall.Round(time.Millisecond), float64(rss)/1024, float64(out.n)/(1<<20))
	}
	fmt.Println()
}

type countWriter struct{ n int64 }

// Write implements io.Writer, counting the bytes.
func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)
