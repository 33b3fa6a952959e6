package main

import (
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/backend/boltfile"
)

func TestVerify_OK(t *testing.T) {
	t.Parallel()
	db := replayed(t, []string{"--every", "2", "--fold", "2", "--summarizer", "lossy", "--drop", "negatives"}, incident(t))
	r := cli(t, "", "verify", db)
	wantCode(t, r, exitOK)
	if r.stdout != "ok\n" || r.stderr != "" {
		t.Errorf("stdout %q stderr %q", r.stdout, r.stderr)
	}
}

// damage rewrites one stored value of db through bbolt directly.
func damage(t *testing.T, db string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	b, err := bolt.Open(db, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestVerify_Damaged(t *testing.T) {
	t.Parallel()
	db := replayed(t, []string{"--every", "2"}, incident(t))
	damage(t, db, func(tx *bolt.Tx) error {
		// A session's events are in its bucket, keyed 0xFE, seq.
		l0 := tx.Bucket([]byte("s/mig"))
		if l0 == nil {
			t.Fatal("no session mig")
		}
		key := binary.BigEndian.AppendUint64([]byte{0xFE}, 5)
		v := append([]byte(nil), l0.Get(key)...)
		if len(v) == 0 {
			t.Fatal("no event at seq 5")
		}
		v[len(v)-6] ^= 0x20 // the payload's last byte, before the 5-byte trailer: the envelope's checksum catches it
		return l0.Put(key, v)
	})
	r := cli(t, "", "verify", db)
	wantCode(t, r, exitProblems)
	if r.stdout == "ok\n" || !strings.Contains(r.stdout, "checksum mismatch") {
		t.Errorf("stdout %q, want a problem line about the checksum", r.stdout)
	}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if !strings.HasPrefix(line, `session "mig": `) {
			t.Errorf("problem line %q does not name the session", line)
		}
	}
	// It says what to do next, and that command runs: the damaged session
	// is left out and named.
	hint := "Hint: to copy every session that reads intact into a new database, run: strata copy --skip-damaged " + db + " NEW.db\n"
	if r.stderr != hint {
		t.Errorf("stderr %q, want %q", r.stderr, hint)
	}
	salvaged := filepath.Join(t.TempDir(), "new.db")
	r = cli(t, "", "copy", "--skip-damaged", db, salvaged)
	wantCode(t, r, exitError)
	if !strings.Contains(r.stdout+r.stderr, "mig") {
		t.Errorf("copy --skip-damaged: stdout %q, stderr %q; want the damaged session named", r.stdout, r.stderr)
	}
	// Reading the damaged event is an error, never wrong data.
	r = cli(t, "", "dump", "--raw", db)
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "damaged") {
		t.Errorf("dump of a damaged database: stderr %q", r.stderr)
	}
}

// verify's child process dies or breaks the protocol: a problem, exit 3.
func TestVerify_ChildCrashes(t *testing.T) {
	db := replayed(t, nil, incident(t))
	for _, tc := range []struct{ how, want string }{
		{"kill", "verify crashed: signal: killed\n"},
		{"panic", "verify crashed: exit status 2\n"},
		{"garbage", `verify crashed: unexpected output "this is not the protocol"` + "\n"},
	} {
		t.Run(tc.how, func(t *testing.T) {
			t.Setenv(envCrash, tc.how)
			r := cli(t, "", "verify", db)
			wantCode(t, r, exitProblems)
			if r.stdout != tc.want {
				t.Errorf("stdout %q, want %q", r.stdout, tc.want)
			}
			if tc.how == "panic" && !strings.Contains(r.stderr, "injected panic") {
				t.Errorf("the child's panic is not relayed: stderr %q", r.stderr)
			}
		})
	}
}

// A file that cannot be opened as a database is an error, not a problem.
func TestVerify_CannotOpen(t *testing.T) {
	t.Parallel()
	junk := make([]byte, 64<<10)
	for i := range junk {
		junk[i] = byte(i*7 + i>>8)
	}
	newer := replayed(t, nil, incident(t))
	damage(t, newer, func(tx *bolt.Tx) error {
		// The meta record as every format keeps it (boltfile's envelope.go):
		// msgpack {"f": format, "c": creator}, then the CRC32C of its
		// identity (no session, code 0xF0, key "version") and the payload,
		// big-endian, then the envelope version 1.
		payload, err := msgpack.Marshal(&struct {
			F int    `msgpack:"f"`
			C string `msgpack:"c"`
		}{boltfile.FormatVersion + 1, "strata"})
		if err != nil {
			return err
		}
		key := []byte("version")
		tab := crc32.MakeTable(crc32.Castagnoli)
		crc := crc32.Checksum(append([]byte{0, 0xF0, byte(len(key))}, key...), tab)
		crc = crc32.Update(crc, tab, payload)
		v := binary.BigEndian.AppendUint32(payload, crc)
		return tx.Bucket([]byte("meta")).Put(key, append(v, 1))
	})
	for _, tc := range []struct{ name, path, want string }{
		{"missing", tempDB(t), "does not exist"},
		{"empty", writeFile(t, "empty.db", ""), "is empty"},
		{"not strata", writeFile(t, "junk.db", string(junk)), "not a strata database"},
		{"newer format", newer, "newer than this strata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := cli(t, "", "verify", tc.path)
			wantCode(t, r, exitError)
			if !strings.HasPrefix(r.stderr, "Error: ") || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
				t.Errorf("stdout %q stderr %q, want %q", r.stdout, r.stderr, tc.want)
			}
		})
	}
	r := cli(t, "", "verify", writeFile(t, "empty.db", ""))
	if !strings.Contains(r.stderr, "\nHint: ") {
		t.Errorf("the hint is not relayed from the child: %q", r.stderr)
	}
	if _, err := os.Stat(tempDB(t)); !os.IsNotExist(err) {
		t.Errorf("verify created a database")
	}
}

func TestVerify_Usage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"verify"}, {"verify", "a", "b"}, {"verify", "--frob", "a"}} {
		wantCode(t, cli(t, "", args...), exitUsage, args...)
	}
}

// TestVerify_Progress checks the child's progress lines (sent only when the
// parent's stderr is a terminal, which the other tests' buffers are not:
// TestVerify_OK checks that verify is then quiet).
func TestVerify_Progress(t *testing.T) {
	t.Parallel()
	db := replayed(t, []string{"--every", "2"}, incident(t))
	r := cli(t, "", "verify", "--in-process", "--progress", db)
	wantCode(t, r, exitOK)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) < 2 || !strings.Contains(lines[len(lines)-2], `"progress":{"sessions":1,"total_sessions":1,"events":`) ||
		!strings.Contains(lines[len(lines)-1], `"done":true`) {
		t.Errorf("want a final progress line before done, got:\n%s", r.stdout)
	}
	if isTerminal(&strings.Builder{}) {
		t.Error("a buffer is not a terminal")
	}
}

// verifyDoc is what `verify --json` prints.
type verifyDoc struct {
	OK       *bool  `json:"ok"`
	Sessions int    `json:"sessions"`
	Events   uint64 `json:"events"`
	Nodes    int    `json:"nodes"`
	Problems []struct {
		Session string `json:"session"`
		What    string `json:"what"`
	} `json:"problems"`
}

// verifyJSONOf runs `verify --json` with want as the exit status and
// decodes what it prints.
func verifyJSONOf(t *testing.T, want int, args ...string) verifyDoc {
	t.Helper()
	args = append([]string{"verify", "--json"}, args...)
	r := cli(t, "", args...)
	wantCode(t, r, want, args...)
	var d verifyDoc
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || d.OK == nil || d.Problems == nil {
		t.Fatalf("%v: %v\n%s", args, err, r.stdout)
	}
	return d
}

// --json: the same verdict and exit status, as one document.
func TestVerify_JSON(t *testing.T) {
	db := replayed(t, []string{"--every", "2"}, incident(t))
	if d := verifyJSONOf(t, exitOK, db); !*d.OK || len(d.Problems) != 0 || d.Sessions != 1 || d.Events != 41 || d.Nodes != 3 {
		t.Errorf("verify --json of a sound database: %+v", d)
	}
	t.Run("crash", func(t *testing.T) {
		t.Setenv(envCrash, "kill")
		d := verifyJSONOf(t, exitProblems, db)
		if *d.OK || len(d.Problems) != 1 || d.Problems[0].What != "verify crashed: signal: killed" {
			t.Errorf("verify --json of a crashed check: %+v", d)
		}
	})
	damage(t, db, func(tx *bolt.Tx) error {
		l0 := tx.Bucket([]byte("s/mig"))
		key := binary.BigEndian.AppendUint64([]byte{0xFE}, 5)
		v := append([]byte(nil), l0.Get(key)...)
		v[len(v)-6] ^= 0x20
		return l0.Put(key, v)
	})
	d := verifyJSONOf(t, exitProblems, db)
	if *d.OK || len(d.Problems) == 0 {
		t.Fatalf("verify --json of a damaged database: %+v", d)
	}
	for _, p := range d.Problems {
		if p.Session != "mig" || p.What == "" {
			t.Errorf("problem %+v", p)
		}
	}
	if !strings.Contains(d.Problems[0].What, "checksum mismatch") {
		t.Errorf("first problem %q", d.Problems[0].What)
	}
	// A file that cannot be checked is an error, not a document.
	r := cli(t, "", "verify", "--json", db+".absent")
	wantCode(t, r, exitError)
	if r.stdout != "" {
		t.Errorf("stdout %q", r.stdout)
	}
}
