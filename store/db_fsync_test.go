//go:build linux && amd64

package store_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"unsafe"

	"github.com/cockroachdb/errors"
	"golang.org/x/sys/unix"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// The fsync failure tests make fdatasync and fsync fail with EIO in a child
// process (the test binary re-executed with fsyncChildEnv set), through a
// seccomp filter on every thread. Two modes:
//
//   - "data": every sync fails, so a commit fails at its first fdatasync,
//     after writing its data pages and before writing the meta page;
//   - "meta": only a sync that follows a write of a meta page (offset below
//     two pages) fails, so a commit fails at its second fdatasync, after
//     the new meta page is already in the page cache. The filter hands
//     every pwrite64, fdatasync and fsync to a supervisor goroutine
//     (SECCOMP_RET_USER_NOTIF) that decides.
const (
	fsyncChildEnv = "STRATA_TEST_FSYNC_CHILD_DB"
	fsyncModeEnv  = "STRATA_TEST_FSYNC_MODE"
)

// fsyncReport is one JSON line of the child's output.
type fsyncReport struct {
	Op       string             `json:"op"`
	Err      string             `json:"err,omitempty"`
	EIO      bool               `json:"eio,omitempty"`
	Poisoned bool               `json:"poisoned,omitempty"`
	Res      store.AppendResult `json:"res"`
	Text     string             `json:"text,omitempty"`
	Head     uint64             `json:"head,omitempty"`
	Texts    []string           `json:"texts,omitempty"` // read back: every event's text
	Passed   int                `json:"passed,omitempty"`
	Failed   int                `json:"failed,omitempty"`
}

func fsyncEmit(r fsyncReport) {
	b, _ := json.Marshal(r)
	os.Stdout.Write(append(b, '\n'))
}

func errReport(op string, err error) fsyncReport {
	r := fsyncReport{Op: op}
	if err != nil {
		r.Err = err.Error()
		r.EIO = errors.Is(err, syscall.EIO)
		r.Poisoned = errors.Is(err, store.ErrPoisoned)
	}
	return r
}

// fsyncReadBack reports what the same process reads of session s.
func fsyncReadBack(db *store.DB, op string) {
	r := fsyncReport{Op: op}
	err := db.View(func(s *store.Snapshot) error {
		info, err := s.Info("s")
		if err != nil {
			return err
		}
		r.Head = info.Head
		return s.Events("s", 1, info.Head, func(e tier.Event) error {
			r.Texts = append(r.Texts, e.Text)
			return nil
		})
	})
	if err != nil {
		r.Err = err.Error()
	}
	fsyncEmit(r)
}

// seccomp filter instructions.
func bpfStmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
func bpfJeq(k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: jt, Jf: jf, K: k}
}

// installSyncFilter installs, on every thread of the process, a filter
// that returns action for fdatasync and fsync (and, when alsoPwrite, for
// pwrite64) on x86_64 and allows everything else. It returns the
// listener's fd when flags ask for one.
func installSyncFilter(action uint32, alsoPwrite bool, flags uintptr) (int, error) {
	const (
		offNr   = 0 // offsetof(struct seccomp_data, nr)
		offArch = 4 // offsetof(struct seccomp_data, arch)
	)
	pw := uint32(unix.SYS_FDATASYNC) // matches nothing new when !alsoPwrite
	if alsoPwrite {
		pw = unix.SYS_PWRITE64
	}
	prog := []unix.SockFilter{
		bpfStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArch),
		bpfJeq(unix.AUDIT_ARCH_X86_64, 0, 5), // another arch: allow
		bpfStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offNr),
		bpfJeq(unix.SYS_FDATASYNC, 4, 0),
		bpfJeq(unix.SYS_FSYNC, 3, 0),
		bpfJeq(pw, 2, 0),
		bpfStmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ALLOW),
		bpfStmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ALLOW),
		bpfStmt(unix.BPF_RET|unix.BPF_K, action),
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// no_new_privs and the filter are per thread: set both on this one;
	// TSYNC copies them to every other thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return -1, fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return -1, fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER, %#x): %w", flags, errno)
	}
	return int(fd), nil
}

// seccompNotif and seccompNotifResp are struct seccomp_notif and struct
// seccomp_notif_resp (x/sys/unix has the ioctls, not the types).
type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// superviseMetaSync answers the filter's notifications: every write and
// every sync goes on, except a sync that follows a write of a meta page,
// which fails with EIO. It counts the syncs passed and failed.
func superviseMetaSync(fd int, passed, failed *int, mu chan struct{}) {
	metaEnd := uint64(2 * os.Getpagesize()) // bbolt's two meta pages
	metaWritten := false
	for {
		var n seccompNotif
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n))); errno != 0 {
			if errno == unix.EINTR || errno == unix.ENOENT {
				continue
			}
			return
		}
		resp := seccompNotifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
		switch n.Nr {
		case unix.SYS_PWRITE64:
			metaWritten = n.Args[3] < metaEnd
		default: // fdatasync, fsync
			mu <- struct{}{}
			if metaWritten {
				resp = seccompNotifResp{ID: n.ID, Error: -int32(unix.EIO)}
				*failed++
			} else {
				*passed++
			}
			<-mu
			metaWritten = false
		}
		_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
	}
}

// TestFsync_Child is not a test: it is the child process of
// TestInject_FsyncFailure. It appends (acknowledged appends are reported),
// plans a compaction, makes syncs fail, then tries an Append and the
// Commit, reporting each result and what it reads back, as JSON lines.
func TestFsync_Child(t *testing.T) {
	path := os.Getenv(fsyncChildEnv)
	if path == "" {
		t.Skip("helper process for TestInject_FsyncFailure")
	}
	mode := os.Getenv(fsyncModeEnv)
	fail := func(err error) {
		fsyncEmit(fsyncReport{Op: "fatal", Err: err.Error()})
		os.Exit(2)
	}
	db, err := store.Open(path, store.Options{})
	if err != nil {
		fail(err)
	}
	// Phase one: durable, acknowledged appends.
	for i := 1; i <= 8; i++ {
		text := fmt.Sprintf("acked %d", i)
		kind := tier.KindAssistant
		if i%2 == 1 {
			kind = tier.KindUser
		}
		res, err := db.Append("s", tier.Event{Kind: kind, Text: text})
		if err != nil {
			fail(err)
		}
		fsyncEmit(fsyncReport{Op: "ack", Res: res, Text: text})
	}
	p, err := compaction.Policy{EveryTurns: 2, Budget: 100}.PlanSpan(db, "s")
	if err != nil {
		fail(err)
	}
	sum := summarize(t, compaction.Extractive{}, p)

	// Phase two: the disk fails its syncs.
	var passed, failed int
	mu := make(chan struct{}, 1)
	switch mode {
	case "data":
		_, err = installSyncFilter(unix.SECCOMP_RET_ERRNO|uint32(unix.EIO), false, unix.SECCOMP_FILTER_FLAG_TSYNC)
	case "meta":
		var fd int
		fd, err = installSyncFilter(unix.SECCOMP_RET_USER_NOTIF, true,
			unix.SECCOMP_FILTER_FLAG_TSYNC|unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH|unix.SECCOMP_FILTER_FLAG_NEW_LISTENER)
		if err == nil {
			go superviseMetaSync(fd, &passed, &failed, mu)
		}
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fsyncEmit(fsyncReport{Op: "skip", Err: err.Error()})
		os.Exit(0)
	}
	fsyncEmit(fsyncReport{Op: "filter"})
	// Check the filter bites before relying on it.
	{
		f, err := os.CreateTemp(filepath.Dir(path), "probe")
		if err != nil {
			fail(err)
		}
		_, _ = f.WriteAt([]byte("x"), 0) // a "meta" write for the supervisor
		err = f.Sync()
		f.Close()
		os.Remove(f.Name())
		if !errors.Is(err, syscall.EIO) {
			fail(fmt.Errorf("the filter is installed but fsync returned %v", err))
		}
	}

	res, err := db.Append("s", tier.Event{Kind: tier.KindUser, Text: "failed append"})
	r := errReport("append", err)
	r.Res, r.Text = res, "failed append"
	fsyncEmit(r)
	fsyncReadBack(db, "read after append")

	_, err = db.Commit(p, sum)
	fsyncEmit(errReport("commit", err))
	fsyncReadBack(db, "read after commit")

	_, err = db.Append("s", tier.Event{Kind: tier.KindUser, Text: "second append"})
	fsyncEmit(errReport("append again", err))
	fsyncReadBack(db, "read after append again")

	fsyncEmit(errReport("close", db.Close()))
	mu <- struct{}{}
	fsyncEmit(fsyncReport{Op: "syncs", Passed: passed, Failed: failed})
	os.Exit(0)
}

// TestInject_FsyncFailure makes a durable DB's fsyncs fail with EIO in a
// child process, at a commit's first fdatasync (data pages) or at its
// second (meta page), and checks the outcome: the failed operation returns
// the EIO, marked ErrPoisoned; every later write on that DB is refused
// with ErrPoisoned and reads go on; after a reopen the file verifies,
// every acknowledged append is there unaltered, and the failed append is
// there whole or not at all — not at all when the data sync failed; when
// the meta sync failed it is visible, in the same process and after a
// reopen, since the meta page reached the page cache.
func TestInject_FsyncFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	for _, mode := range []string{"data", "meta"} {
		t.Run(mode, func(t *testing.T) { testFsyncFailure(t, mode) })
	}
}

func testFsyncFailure(t *testing.T, mode string) {
	path := filepath.Join(t.TempDir(), "strata.db")
	db, err := store.Open(path, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestFsync_Child$", "-test.count=1")
	cmd.Env = append(os.Environ(), fsyncChildEnv+"="+path, fsyncModeEnv+"="+mode)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s\n%s", err, out, stderr.Bytes())
	}
	var acked []ack
	got := map[string]fsyncReport{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if !bytes.HasPrefix(sc.Bytes(), []byte("{")) {
			continue // the test framework's own lines
		}
		var r fsyncReport
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("child line %q: %v", sc.Text(), err)
		}
		t.Logf("child: %s", sc.Bytes())
		switch r.Op {
		case "skip":
			t.Skipf("cannot install a seccomp filter here: %s", r.Err)
		case "fatal":
			t.Fatalf("child failed: %s", r.Err)
		case "ack":
			acked = append(acked, ack{session: "s", res: r.Res, texts: []string{r.Text}})
		default:
			got[r.Op] = r
		}
	}
	if _, ok := got["syncs"]; !ok || len(acked) != 8 {
		t.Fatalf("the child did not finish (%d acks):\n%s\n%s", len(acked), out, stderr.Bytes())
	}

	// The failed operation: EIO, and the DB is poisoned.
	ap := got["append"]
	if ap.Err == "" || !ap.EIO || !ap.Poisoned {
		t.Errorf("append with a failing fsync = %q (EIO %v, ErrPoisoned %v), want EIO marked ErrPoisoned", ap.Err, ap.EIO, ap.Poisoned)
	}
	for _, op := range []string{"commit", "append again"} {
		if r := got[op]; r.Err == "" || !r.Poisoned || r.EIO {
			t.Errorf("%s after the failure = %q (ErrPoisoned %v), want ErrPoisoned alone", op, r.Err, r.Poisoned)
		}
	}
	if got["close"].Err != "" {
		t.Errorf("Close after the failure: %s", got["close"].Err)
	}
	// What the same process read: the acknowledged events, and the failed
	// append whole or not at all.
	sameProcess := false
	for _, op := range []string{"read after append", "read after commit", "read after append again"} {
		r := got[op]
		if r.Err != "" {
			t.Fatalf("%s: reads go on after the failure, got %s", op, r.Err)
		}
		visible := checkFsyncTexts(t, op, r.Texts, acked)
		if op == "read after append" {
			sameProcess = visible
		} else if visible != sameProcess {
			t.Errorf("%s: the failed append's visibility changed", op)
		}
	}

	// Reopened without the filter.
	dbtest.MustVerify(t, path)
	ro, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	st := state(t, ro, "s")
	texts := make([]string, len(st.Events))
	for i, e := range st.Events {
		texts[i] = e.Text
	}
	afterReopen := checkFsyncTexts(t, "after reopen", texts, acked)
	if st.Info.Roots != 0 {
		t.Errorf("after reopen: %d roots, the failed commit stored one", st.Info.Roots)
	}
	t.Logf("%s sync failing: the failed append is visible in the same process: %v, after reopen: %v (syncs passed %d, failed %d)",
		mode, sameProcess, afterReopen, got["syncs"].Passed, got["syncs"].Failed)
	switch mode {
	case "data":
		if sameProcess || afterReopen {
			t.Errorf("an append whose data sync failed is visible")
		}
	case "meta":
		if got["syncs"].Failed == 0 {
			t.Errorf("no meta sync failed")
		}
		// The finding that makes poisoning necessary: bbolt wrote the
		// meta page before the sync that failed, so the page cache (and
		// the shared mmap) hold the "failed" transaction.
		if !sameProcess || !afterReopen {
			t.Errorf("an append whose meta sync failed: visible in the same process %v, after reopen %v; the godoc of ErrPoisoned says it can be", sameProcess, afterReopen)
		}
	}
}

// checkFsyncTexts checks that texts are the acknowledged appends, then at
// most the failed append, and says whether the failed append is there.
func checkFsyncTexts(t *testing.T, where string, texts []string, acked []ack) bool {
	t.Helper()
	if len(texts) < len(acked) {
		t.Fatalf("%s: %d events, %d were acknowledged", where, len(texts), len(acked))
	}
	for i, a := range acked {
		if texts[a.res.First-1] != a.texts[0] || a.res.First != uint64(i+1) {
			t.Fatalf("%s: seq %d holds %q, acknowledged %q", where, a.res.First, texts[a.res.First-1], a.texts[0])
		}
	}
	switch extra := texts[len(acked):]; {
	case len(extra) == 0:
		return false
	case len(extra) == 1 && extra[0] == "failed append":
		return true
	default:
		t.Fatalf("%s: events past the acknowledged ones: %q", where, extra)
		return false
	}
}
