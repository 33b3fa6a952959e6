package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/pgtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// The PostgreSQL scenarios: strata on PostgreSQL beside PostgresPeer, on
// the server STRATA_TEST_POSTGRES names (each sub-benchmark in a schema of
// its own, internal/pgtest), in the same run. Without the variable they
// skip with a message naming it.

// pgSessions is how many sessions append at once in the append scenarios.
const pgSessions = 64

// pgPeers are the peers of the append scenarios.
var pgPeers = []string{PeerStrata, PeerPostgres}

// envChild makes the test binary an appending process of
// BenchmarkPostgresAppendProcesses: "PEER\tURL\tFIRST\tSESSIONS\tEVENTS".
// With envChildProfile naming a directory, each appending process writes
// the CPU profile of its appends there, as PID.prof.
const (
	envChild        = "STRATA_BENCH_PG_CHILD"
	envChildProfile = "STRATA_BENCH_PG_CPUPROFILE"
)

func TestMain(m *testing.M) {
	if v := os.Getenv(envChild); v != "" {
		if err := appendChild(v, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "append child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// openPG opens the named peer in the schema url names (created by
// preparePG).
func openPG(name, url string) (Peer, error) {
	if name != PeerStrata {
		return OpenPostgresPeer(name, url, pgSessions)
	}
	db, err := store.Open(url, store.Options{})
	if err != nil {
		return nil, err
	}
	return &StrataPeer{DB: db}, nil
}

// preparePG creates the named peer's tables in a new schema of tb's and
// returns its URL: what the processes of a run open.
func preparePG(tb testing.TB, name string) string {
	url := pgtest.URL(tb)
	var p Peer
	var err error
	if name != PeerStrata {
		p, err = OpenPostgresPeer(name, url, 1)
	} else {
		p, err = OpenStrata(url, store.Options{})
	}
	if err != nil {
		tb.Fatal(err)
	}
	if err := p.Close(); err != nil {
		tb.Fatal(err)
	}
	return url
}

// pgAgents returns n synthetic sessions of each events, numbered from
// first: the sessions of the append scenarios, the same in every process
// layout.
func pgAgents(first, n, each int) []Session {
	sessions := make([]Session, n)
	for i := range sessions {
		sessions[i] = Synth(fmt.Sprintf("agent-%02d", first+i), each, uint64(100+first+i))
	}
	return sessions
}

// storedEvents returns the events the named peer holds in the schema url
// names.
func storedEvents(name, url string, sessions int) (int, error) {
	p, err := openPG(name, url)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	if pp, ok := p.(*PostgresPeer); ok {
		return pp.Count()
	}
	db := p.(*StrataPeer).DB
	n := 0
	for i := range sessions {
		info, err := db.Info(fmt.Sprintf("agent-%02d", i))
		if err != nil {
			return 0, err
		}
		n += int(info.Head)
	}
	return n, nil
}

// BenchmarkPostgresAppendConcurrent: durable appends from 64 sessions at
// once, one goroutine per session, one event per call, in one process —
// strata's group commit against one autocommitted INSERT per event on 64
// connections. ns/op is per event, all sessions together.
func BenchmarkPostgresAppendConcurrent(b *testing.B) {
	for _, name := range pgPeers {
		b.Run(name, func(b *testing.B) {
			url := preparePG(b, name)
			p, err := openPG(name, url)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			each := (b.N + pgSessions - 1) / pgSessions
			sessions := pgAgents(0, pgSessions, each)
			b.ReportAllocs()
			b.ResetTimer()
			d, err := AppendConcurrent(p, sessions)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(pgSessions*each)/d.Seconds(), "events/s")
		})
	}
}

// BenchmarkPostgresAppendProcesses is BenchmarkPostgresAppendConcurrent
// with the 64 sessions split over 1, 2 and 4 processes (this test binary,
// started again), each appending to its own. The clock runs from the
// moment every process is open and has appended each of its sessions'
// first event — the session made, the connections opened, as a
// long-running worker's are — to its last acknowledged append, so that it
// measures the rate of appends, not the start of a process; the events/s
// counts the events in that time. The allocations are the parent's only.
func BenchmarkPostgresAppendProcesses(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, procs := range []int{1, 2, 4} {
		for _, name := range pgPeers {
			b.Run(fmt.Sprintf("procs=%d/%s", procs, name), func(b *testing.B) {
				url := preparePG(b, name)
				each := max(2, (b.N+pgSessions-1)/pgSessions) // the first before the clock
				per := pgSessions / procs
				children := make([]*appendProc, procs)
				for i := range children {
					children[i] = startChild(b, exe, strings.Join([]string{name, url,
						strconv.Itoa(i * per), strconv.Itoa(per), strconv.Itoa(each)}, "\t"))
				}
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for _, c := range children {
					c.send("go")
				}
				for _, c := range children {
					c.expect("done")
				}
				d := time.Since(start)
				b.StopTimer()
				for _, c := range children {
					if err := c.cmd.Wait(); err != nil {
						b.Fatalf("append child: %v", err)
					}
				}
				b.ReportMetric(float64(pgSessions*(each-1))/d.Seconds(), "events/s")
				if n, err := storedEvents(name, url, pgSessions); err != nil || n != pgSessions*each {
					b.Fatalf("%s holds %d events, want %d (%v)", name, n, pgSessions*each, err)
				}
			})
		}
	}
}

// appendProc is a child process of BenchmarkPostgresAppendProcesses.
type appendProc struct {
	b     *testing.B
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// startChild starts the test binary as an appending process (envChild =
// spec) and waits until it is ready.
func startChild(b *testing.B, exe, spec string) *appendProc {
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envChild+"="+spec)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &appendProc{b: b, cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	b.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	c.expect("ready")
	return c
}

func (c *appendProc) send(line string) {
	if _, err := fmt.Fprintln(c.stdin, line); err != nil {
		c.b.Fatalf("append child: %v", err)
	}
}

func (c *appendProc) expect(line string) {
	if !c.out.Scan() || c.out.Text() != line {
		c.b.Fatalf("append child: %q, want %q (%v)", c.out.Text(), line, c.out.Err())
	}
}

// appendChild is the appending process: it opens the peer, appends each
// of its sessions' first event, prints "ready", waits for a line on in,
// appends the other events one per call, one goroutine per session, and
// prints "done".
func appendChild(spec string, in io.Reader, out io.Writer) error {
	f := strings.Split(spec, "\t")
	if len(f) != 5 {
		return fmt.Errorf("%s=%q: want PEER, URL, FIRST, SESSIONS, EVENTS", envChild, spec)
	}
	var n [3]int
	for i := range n {
		var err error
		if n[i], err = strconv.Atoi(f[2+i]); err != nil {
			return err
		}
	}
	p, err := openPG(f[0], f[1])
	if err != nil {
		return err
	}
	defer p.Close()
	sessions := pgAgents(n[0], n[1], n[2])
	// Each session's first event, before the clock: it creates the
	// session, and the connections its appends will use.
	first := make([]Session, len(sessions))
	for i, s := range sessions {
		first[i] = Session{ID: s.ID, Events: s.Events[:1]}
		sessions[i].Events = s.Events[1:]
	}
	if _, err := AppendConcurrent(p, first); err != nil {
		return err
	}
	fmt.Fprintln(out, "ready")
	if _, err := bufio.NewReader(in).ReadString('\n'); err != nil {
		return err
	}
	if dir := os.Getenv(envChildProfile); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%d.prof", os.Getpid())))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if _, err := AppendConcurrent(p, sessions); err != nil {
		return err
	}
	fmt.Fprintln(out, "done")
	return p.Close()
}

// BenchmarkPostgresReplayReal: the real sessions loaded in bulk — by
// strata as `strata replay` does, every 500 tokens (SizePolicy), under the
// default policy and under scenario 3's, every 40 events — and by the peers in transactions
// of up to PostgresLoadTx events, without summaries. ns/op is per load of
// all of them; compactions/op counts strata's.
func BenchmarkPostgresReplayReal(b *testing.B) {
	sessions := realSessions(b)
	n := Count(sessions)
	for _, pol := range []struct {
		name   string
		policy compaction.Policy
	}{{PeerStrata, SizePolicy}, {PeerStrata + " default policy", compaction.DefaultPolicy}, {PeerStrata + " every 40 events", ReplayPolicy}} {
		b.Run(pol.name, func(b *testing.B) {
			b.ReportAllocs()
			var total time.Duration
			committed := 0
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				url := pgtest.URL(b)
				b.StartTimer()
				d, c, err := ReplayStrataWith(url, sessions, store.Options{}, pol.policy)
				if err != nil {
					b.Fatal(err)
				}
				total += d
				committed += c
			}
			b.ReportMetric(float64(n*b.N)/total.Seconds(), "events/s")
			b.ReportMetric(float64(committed)/float64(b.N), "compactions/op")
		})
	}
	for _, name := range []string{PeerPostgres, PeerPostgresPipelined} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				p, err := OpenPostgresPeer(name, pgtest.URL(b), 1)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				d, err := LoadPeer(p, sessions, PostgresLoadTx)
				if err != nil {
					b.Fatal(err)
				}
				total += d
				p.Close()
			}
			b.ReportMetric(float64(n*b.N)/total.Seconds(), "events/s")
		})
	}
}

// BenchmarkPostgresResumeBounded: resume of the latest marker of one
// session of 1k and 100k events on PostgreSQL, under a bounded frame
// (BoundedPolicy). Each history is built first, with synchronous_commit
// off (the 100k-event one takes about a minute).
func BenchmarkPostgresResumeBounded(b *testing.B) { benchmarkPostgresResume(b, BoundedPolicy) }

// BenchmarkPostgresResumeLog is BenchmarkPostgresResumeBounded under the
// O(log n) frame (HistoryPolicy).
func BenchmarkPostgresResumeLog(b *testing.B) { benchmarkPostgresResume(b, HistoryPolicy) }

func benchmarkPostgresResume(b *testing.B, policy compaction.Policy) {
	for _, n := range []int{1_000, 100_000} {
		url := pgtest.URL(b)
		if err := BuildHistoryWith(url, n, policy); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			db, err := store.Open(url, store.Options{ReadOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := db.Resume("history", store.Latest); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPostgresSmoke runs every PostgreSQL scenario at a tiny size, so that
// the benchmarks keep working, and checks that the peers store the msgpack
// strata stores. It asserts no timing.
func TestPostgresSmoke(t *testing.T) {
	s := Synth("smoke", 40, 3)
	urls := map[string]string{}
	for _, name := range []string{PeerStrata, PeerPostgres, PeerPostgresPipelined} {
		url := preparePG(t, name)
		urls[name] = url
		// Two appending processes' worth, in this one: appendChild.
		for first := 0; first < 4; first += 2 {
			var out strings.Builder
			spec := strings.Join([]string{name, url, strconv.Itoa(first), "2", "5"}, "\t")
			if err := appendChild(spec, strings.NewReader("go\n"), &out); err != nil || out.String() != "ready\ndone\n" {
				t.Fatalf("%s: append child: %q, %v", name, out.String(), err)
			}
		}
		if n, err := storedEvents(name, url, 4); err != nil || n != 20 {
			t.Fatalf("%s holds %d events of 20 (%v)", name, n, err)
		}
		p, err := openPG(name, url)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := LoadPeer(p, []Session{s}, 7); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// strata's event records are the bench encoder's msgpack, and so are
	// the peers' rows, Opener aside (strata sets it; the peers do not
	// track calls).
	ctx := context.Background()
	en := NewEncoder()
	bodies := func(url, query string) map[uint64][]byte {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, query)
		if err != nil {
			t.Fatal(err)
		}
		out := map[uint64][]byte{}
		for rows.Next() {
			var seq int64
			var v []byte
			if err := rows.Scan(&seq, &v); err != nil {
				t.Fatal(err)
			}
			out[uint64(seq)] = v
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	stored := bodies(urls[PeerStrata], `SELECT seq, value FROM strata_events WHERE session = 'smoke'`)
	db, err := store.Open(urls[PeerStrata], store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	err = db.View(func(sn *store.Snapshot) error {
		return sn.Events("smoke", 1, uint64(len(s.Events)), func(e tier.Event) error {
			want := s.Events[e.Seq-1]
			want.Opener = e.Opener
			if enc := en.Encode(&want, e.Seq); !bytes.Equal(stored[e.Seq], enc) {
				t.Errorf("seq %d: strata stores %x, the peers' encoder %x", e.Seq, stored[e.Seq], enc)
			}
			n++
			return nil
		})
	})
	if err != nil || n != len(s.Events) {
		t.Fatalf("compared %d events of %d: %v", n, len(s.Events), err)
	}
	for _, name := range []string{PeerPostgres, PeerPostgresPipelined} {
		got := bodies(urls[name], `SELECT seq, body FROM `+PeerPostgresTable+` WHERE session = 'smoke'`)
		for i := range s.Events {
			seq := uint64(i + 1)
			if enc := en.Encode(&s.Events[i], seq); !bytes.Equal(got[seq], enc) {
				t.Errorf("%s seq %d: stores %x, want %x", name, seq, got[seq], enc)
			}
		}
	}
	if dir := RealDir(); dir != "" {
		real, err := LoadReal(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, c, err := ReplayStrataWith(pgtest.URL(t), real[:3], store.Options{}, SizePolicy); err != nil || c == 0 {
			t.Fatalf("replay: %d committed, %v", c, err)
		}
	}
	url := pgtest.URL(t)
	if err := BuildHistoryWith(url, 300, BoundedPolicy); err != nil {
		t.Fatal(err)
	}
	hdb, err := store.Open(url, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer hdb.Close()
	if info, err := hdb.Info("history"); err != nil || info.Head != 300 || info.Roots > BoundedRoots {
		t.Fatalf("history: %+v, %v", info, err)
	}
	if _, err := hdb.Resume("history", store.Latest); err != nil {
		t.Fatal(err)
	}
}
