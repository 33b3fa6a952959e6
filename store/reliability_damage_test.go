package store_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cerrors "github.com/cockroachdb/errors"
	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/backend/boltfile"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

var damageCases = flag.Int("strata.damage-cases", 16, "random data-page damages of TestDamage_Files (on top of the fixed cases)")

var damageSeed = flag.Int64("strata.damage-seed", 0, "the seed of TestDamage_Files' random damages (0: from the clock; the seed is logged)")

// Environment of the damage child: the damaged file and the pristine one.
const (
	damageChildEnv = "STRATA_TEST_DAMAGE_CHILD_DB"
	damageOrigEnv  = "STRATA_TEST_DAMAGE_ORIG_DB"
)

// TestDamage_Child is not a test: it is the child process of
// TestDamage_Files. It opens the damaged file read-only, verifies it, reads
// back every event, node and resumed context and compares each with the
// pristine copy, and prints one verdict line:
//
//	open-typed CLASS | open-untyped ERR | read VERIFY-PROBLEMS READ-ERRORS WRONG-VALUES
func TestDamage_Child(t *testing.T) {
	path := os.Getenv(damageChildEnv)
	if path == "" {
		t.Skip("helper process for TestDamage_Files")
	}
	db, err := store.Open(path, store.Options{ReadOnly: true, LockTimeout: time.Second})
	if err != nil {
		for _, c := range []struct {
			name string
			err  error
		}{{"corrupt", store.ErrCorrupt}, {"not-strata", store.ErrNotStrata}, {"empty", store.ErrEmptyFile}, {"too-new", store.ErrFormatTooNew}, {"too-old", store.ErrFormatTooOld}} {
			if cerrors.Is(err, c.err) {
				fmt.Printf("verdict open-typed %s\n", c.name)
				os.Exit(0)
			}
		}
		fmt.Printf("verdict open-untyped %q\n", err.Error())
		os.Exit(0)
	}
	problems := 0
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		problems++ // Verify could not run: damage found
	}
	problems += len(rep.Problems)

	orig, err := store.Open(os.Getenv(damageOrigEnv), store.Options{ReadOnly: true})
	if err != nil {
		fmt.Printf("error: pristine copy: %v\n", err)
		os.Exit(2)
	}
	readErrs, wrong := 0, []string{}
	var firstErrs []string
	readErr := func(what string, err error) {
		readErrs++
		if len(firstErrs) < 3 {
			firstErrs = append(firstErrs, strings.ReplaceAll(fmt.Sprintf("%s: %v", what, err), " ", "_"))
		}
	}
	_ = orig.View(func(o *store.Snapshot) error {
		return db.View(func(d *store.Snapshot) error {
			ids, _ := o.Sessions()
			for _, id := range ids {
				oi, _ := o.Info(id)
				di, err := d.Info(id)
				if err != nil {
					readErr("info", err)
					continue
				}
				if di != oi {
					wrong = append(wrong, fmt.Sprintf("%s info", id))
				}
				for seq := uint64(1); seq <= oi.Head; seq++ {
					var oe, de []tier.Event
					_ = o.Events(id, seq, seq, func(e tier.Event) error { oe = append(oe, e); return nil })
					if err := d.Events(id, seq, seq, func(e tier.Event) error { de = append(de, e); return nil }); err != nil {
						readErr("event", err)
						continue
					}
					if !reflect.DeepEqual(oe, de) {
						wrong = append(wrong, fmt.Sprintf("%s seq %d", id, seq))
					}
				}
				_ = o.Nodes(id, func(n tier.Node) error {
					dn, err := d.Node(id, n.ID)
					if err != nil {
						readErr("node", err)
					} else if !reflect.DeepEqual(n, dn) {
						wrong = append(wrong, fmt.Sprintf("%s node %d", id, n.ID))
					}
					return nil
				})
				oc, _ := o.Resume(id, store.Latest)
				dc, err := d.Resume(id, store.Latest)
				if err != nil {
					readErr("resume", err)
				} else if !bytes.Equal(oc.Text(), dc.Text()) {
					wrong = append(wrong, fmt.Sprintf("%s resume", id))
				}
			}
			return nil
		})
	})
	fmt.Printf("verdict read %d %d %d %s %s\n", problems, readErrs, len(wrong), strings.Join(wrong, ","), strings.Join(firstErrs, " "))
	os.Exit(0)
}

// damageCase is one damaged file.
type damageCase struct {
	name   string
	data   []byte
	edit   func(t *testing.T, path string) // after writing data
	region string                          // what was damaged, for the tally
}

// damageSource builds the pristine database: three sessions, compacted
// by extractive and lossy summarizers, with folds (and digests in beta).
func damageSource(t *testing.T) (path string, full []byte) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "pristine.db")
	db, err := store.Open(path, store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	lossy, _ := compaction.NewLossy(compaction.DropNegatives)
	for i, s := range []string{"alpha", "beta", "gamma"} {
		var sum compaction.Summarizer = compaction.Extractive{}
		if i == 2 {
			sum = lossy
		}
		policy := compaction.Policy{EveryTurns: 2, Fold: 2}
		if i == 1 {
			policy.MaxRoots = 2 // digests, and the facts nodes over a prefix record
		}
		c, err := compaction.NewCompactor(db, compaction.Options{Summarizer: sum, Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		log := injectLog(12)
		for j := range log {
			log[j].Text += strings.Repeat(fmt.Sprintf(" %s-%d", s, j), 20)
		}
		for len(log) > 0 {
			n := min(len(log), 5)
			mustAppend(t, db, s, log[:n]...)
			log = log[n:]
			if _, err := c.Run(context.Background(), s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	full, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, full
}

func damageCasesFor(t *testing.T, full []byte, rng *rand.Rand, random int) []damageCase {
	const page = 4096
	pages := len(full) / page
	var cases []damageCase
	add := func(name, region string, data []byte) {
		cases = append(cases, damageCase{name: name, region: region, data: data})
	}
	add("zero-length", "file", nil)
	for p := 1; p < pages; p++ {
		if p > 16 && p%8 != 0 && p != pages-1 {
			continue
		}
		add(fmt.Sprintf("truncated at page %d of %d", p, pages), "truncation", bytes.Clone(full[:p*page]))
	}
	add("truncated mid-page", "truncation", bytes.Clone(full[:len(full)/2+100]))
	flip := func(off int, bit uint) []byte {
		b := bytes.Clone(full)
		b[off] ^= 1 << bit
		return b
	}
	for m := 0; m < 2; m++ {
		for _, off := range []int{0, 8, 16, 20, 24, 32, 48, 56, 64, 72} { // page id, flags, magic, version, page size, root, freelist, pgid, txid, checksum
			add(fmt.Sprintf("meta page %d bit flip at %d", m, off), "meta", flip(m*page+off, uint(rng.Intn(8))))
		}
		b := bytes.Clone(full)
		rng.Read(b[m*page : m*page+128])
		add(fmt.Sprintf("meta page %d random bytes", m), "meta", b)
	}
	both := bytes.Clone(full)
	both[20] ^= 1
	both[page+20] ^= 1
	add("both meta pages damaged", "meta", both)
	// The freelist page's overflow count: tx.Check counts up to it, and
	// 0xFFFFFFFF never ends.
	m := 0
	if binary.LittleEndian.Uint64(full[page+64:]) > binary.LittleEndian.Uint64(full[64:]) {
		m = 1
	}
	over := bytes.Clone(full)
	binary.LittleEndian.PutUint32(over[int(binary.LittleEndian.Uint64(full[m*page+48:]))*page+12:], 0xFFFFFFFF)
	add("freelist page overflow", "data", over)
	for i := 0; i < random; i++ {
		off := 2*page + rng.Intn(len(full)-2*page)
		switch i % 3 {
		case 0:
			add(fmt.Sprintf("data bit flip at %d", off), "data", flip(off, uint(rng.Intn(8))))
		case 1:
			b := bytes.Clone(full)
			n := 1 + rng.Intn(64)
			rng.Read(b[off:min(off+n, len(b))])
			add(fmt.Sprintf("data random %d bytes at %d", n, off), "data", b)
		case 2:
			b := bytes.Clone(full)
			p := off / page * page
			clear(b[p : p+page])
			add(fmt.Sprintf("data page %d zeroed", p/page), "data", b)
		}
	}
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 3*page)...)
	rng.Read(png[8:])
	add("foreign: a PNG", "foreign", png)
	add("foreign: text", "foreign", bytes.Repeat([]byte("not a database\n"), 2000))
	add("foreign: SQLite header", "foreign", append([]byte("SQLite format 3\x00"), make([]byte, 2*page)...))
	if exe, err := os.ReadFile(os.Args[0]); err == nil {
		add("foreign: an executable", "foreign", exe[:min(len(exe), 64<<10)])
	}
	for _, f := range []int{boltfile.MinFormatVersion - 1, boltfile.FormatVersion + 1} {
		cases = append(cases, damageCase{name: fmt.Sprintf("format version %d", f), region: "format", data: bytes.Clone(full), edit: func(t *testing.T, p string) {
			editBolt(t, p, func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("version"), metaRecord(t, f)) })
		}})
	}
	cases = append(cases, damageCase{name: "foreign: bbolt without strata's buckets", region: "foreign", edit: func(t *testing.T, p string) {
		os.Remove(p)
		writeBolt(t, p, func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("other"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte("v"))
		})
	}})
	return cases
}

// TestDamage_Files damages copies of a database in every way we know —
// zero length, truncation at page boundaries, bit flips and random bytes on
// the meta pages and on data pages, zeroed pages, foreign files, a format
// too new or too old — and has a child process open, verify and read each
// against the pristine copy. Each case must end in a typed error at Open, or problems
// found by Verify, or (damage to unused space) a clean read of exactly the
// data written; never a crash, never a hang, never a value that differs
// from what was written without an error. -strata.damage-cases=N sets the
// number of random data-page damages.
func TestDamage_Files(t *testing.T) {
	t.Parallel()
	random := *damageCases
	if testing.Short() {
		random = min(random, 10)
	}
	seed := *damageSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (-strata.damage-seed to repeat)", seed)
	rng := rand.New(rand.NewSource(seed))
	origPath, full := damageSource(t)
	cases := damageCasesFor(t, full, rng, random)
	dir := t.TempDir()

	type outcome struct{ kind, detail string }
	results := make([]outcome, len(cases))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	began := time.Now()
	for i := range cases {
		tc := &cases[i]
		p := filepath.Join(dir, fmt.Sprintf("case-%d.db", i))
		if tc.data != nil || tc.edit == nil {
			if err := os.WriteFile(p, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if tc.edit != nil {
			tc.edit(t, p)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			k, d := runDamageChild(p, origPath, tc.region)
			results[i] = outcome{k, d}
		}()
	}
	wg.Wait()

	tally := map[string]int{}
	regions := map[string]map[string]int{}
	for i, r := range results {
		tc := cases[i]
		tally[r.kind]++
		if regions[tc.region] == nil {
			regions[tc.region] = map[string]int{}
		}
		regions[tc.region][r.kind]++
		switch r.kind {
		case "open-typed", "found-by-verify", "clean", "previous-transaction":
		default:
			t.Errorf("%s: %s %s", tc.name, r.kind, r.detail)
		}
		if tc.region == "format" && (r.kind != "open-typed" || (r.detail != "too-new" && r.detail != "too-old")) {
			t.Errorf("%s: %s %s, want the format refused as too new or too old", tc.name, r.kind, r.detail)
		}
		if r.kind == "clean" && tc.region != "data" && tc.region != "truncation" {
			t.Errorf("%s: damage to the %s went unnoticed", tc.name, tc.region)
		}
	}
	t.Logf("%d cases in %v: %d typed errors at open, %d found by Verify, %d meta pages damaged so that bbolt read the previous transaction (reported by Verify), %d harmless (damage to unused space: every read equal to the original), %d untyped open errors, %d silent wrong values, %d crashes of the child, %d hangs",
		len(cases), time.Since(began).Round(time.Millisecond), tally["open-typed"], tally["found-by-verify"], tally["previous-transaction"], tally["clean"],
		tally["open-untyped"], tally["wrong-value"], tally["crash"], tally["hang"])
	for _, reg := range []string{"file", "truncation", "meta", "data", "foreign", "format"} {
		t.Logf("  %-10s %v", reg, regions[reg])
	}
}

// metaRecord returns a meta record of the given format, as the bbolt
// backend stores it at meta/version: msgpack {"f": format, "c": creator},
// then the backend's trailer — the CRC32C of the record's place (no
// session, the meta code 0xF0, the key) and payload, big-endian, and the
// trailer's version 1.
func metaRecord(t *testing.T, format int) []byte {
	t.Helper()
	payload, err := msgpack.Marshal(&struct {
		Format    int    `msgpack:"f"`
		CreatedBy string `msgpack:"c"`
	}{format, "strata-test"})
	if err != nil {
		t.Fatal(err)
	}
	tab := crc32.MakeTable(crc32.Castagnoli)
	key := []byte("version")
	place := append([]byte{0, 0xF0, byte(len(key))}, key...) // uvarint lengths: both under 128
	crc := crc32.Update(crc32.Checksum(place, tab), tab, payload)
	return append(binary.BigEndian.AppendUint32(payload, crc), 1)
}

// runDamageChild runs the child on path and classifies its verdict.
func runDamageChild(path, orig, region string) (kind, detail string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestDamage_Child$", "-test.count=1")
	cmd.Env = append(os.Environ(), damageChildEnv+"="+path, damageOrigEnv+"="+orig)
	// On a hang, SIGQUIT: the child prints where every goroutine is.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 5 * time.Second
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		tail := stderr.String()
		if i := strings.Index(tail, "TestDamage_Child"); i > 3000 {
			tail = tail[i-3000:]
		}
		return "hang", "no verdict in 60s: " + tail[:min(len(tail), 6000)]
	}
	var verdict string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "verdict ") {
			verdict = strings.TrimPrefix(l, "verdict ")
		}
	}
	var ee *exec.ExitError
	if verdict == "" || errors.As(err, &ee) {
		tail := stderr.String()
		if i := strings.Index(tail, "goroutine "); i > 0 {
			tail = tail[:min(200, i)] + " … " + tail[i:] // the message, then the faulting goroutine
		}
		if len(tail) > 2500 {
			tail = tail[:2500]
		}
		return "crash", fmt.Sprintf("%v: %s %s", err, out.String(), tail)
	}
	f := strings.Fields(verdict)
	switch f[0] {
	case "open-typed":
		return "open-typed", f[1]
	case "open-untyped":
		return "open-untyped", verdict
	case "read":
		var problems, readErrs, wrong int
		fmt.Sscan(strings.Join(f[1:4], " "), &problems, &readErrs, &wrong)
		switch {
		case wrong > 0 && problems == 0:
			return "wrong-value", verdict
		case wrong > 0 && region == "meta":
			// bbolt fell back to the other meta page: every read is the
			// database as of the transaction before, and Verify says so.
			return "previous-transaction", verdict
		case wrong > 0:
			return "wrong-value", "(Verify reported problems, but reads returned wrong data without an error) " + verdict
		case problems > 0:
			return "found-by-verify", verdict
		case readErrs > 0:
			return "read-error-verify-clean", verdict
		}
		return "clean", verdict
	}
	return "crash", "unparsable verdict " + verdict
}
