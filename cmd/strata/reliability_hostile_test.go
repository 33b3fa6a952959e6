package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/tier"
)

// TestReplay_HostileInput feeds replay one bad line after two good ones,
// for every rule of shared/spec/events.md and for hostile input: huge
// lines and ids, invalid UTF-8, control characters, a bad session id.
// Each is refused naming the file and line 3 and the reason; the two lines
// before it are stored and nothing of it or after it; the file verifies.
func TestReplay_HostileInput(t *testing.T) {
	t.Parallel()
	good := `{"session":"s","kind":"user","text":"hello"}
{"kind":"tool_call","id":"c1","name":"bash","text":"ls"}
`
	huge := strings.Repeat("x", tier.DefaultMaxEventBytes+10)
	for _, tc := range []struct{ name, line, want string }{
		// The rules of shared/spec/events.md.
		{"unknown kind", `{"kind":"dance"}`, tier.ErrUnknownKind.Error()},
		{"missing id", `{"kind":"tool_call","name":"bash"}`, tier.ErrMissingID.Error()},
		{"missing key", `{"kind":"rejected","text":"no"}`, tier.ErrMissingKey.Error()},
		{"result for an id not open", `{"kind":"tool_result","id":"nope"}`, tier.ErrNotOpen.Error()},
		{"close for an id not open", `{"kind":"close","id":"nope"}`, tier.ErrNotOpen.Error()},
		{"close of a call", `{"kind":"close","id":"c1"}`, tier.ErrWrongResource.Error()},
		{"id opened twice", `{"kind":"tool_call","id":"c1"}`, tier.ErrAlreadyOpen.Error()},
		{"withdrawal of an inactive constraint", `{"kind":"withdrawn","key":"never"}`, tier.ErrNotActive.Error()},
		{"seq out of order", `{"seq":9,"kind":"assistant"}`, tier.ErrSeqOrder.Error()},
		{"seq repeated", `{"seq":2,"kind":"assistant"}`, tier.ErrSeqOrder.Error()},
		{"turn going back", `{"turn":5,"kind":"user"}` + "\n" + `{"turn":4,"kind":"assistant"}`, ""},
		{"invalid UTF-8 in text", "{\"kind\":\"assistant\",\"text\":\"caf\xe9\"}", tier.ErrInvalidUTF8.Error()},
		{"invalid UTF-8 in an id", "{\"kind\":\"tool_call\",\"id\":\"\xff\xfe\"}", tier.ErrInvalidUTF8.Error()},
		{"line over the size limit", `{"kind":"assistant","text":"` + huge + `"}`, tier.ErrTooLarge.Error()},
		{"unknown field", `{"kind":"user","colour":"red"}`, tier.ErrBadJSON.Error()},
		{"bad JSON", `{"kind":"assistant","text":`, tier.ErrBadJSON.Error()},
		{"two objects on a line", `{"kind":"user"} {"kind":"user"}`, tier.ErrBadJSON.Error()},
		{"bad time", `{"kind":"user","time":"yesterday"}`, tier.ErrBadField.Error()},
		{"ok on a message", `{"kind":"user","ok":false}`, tier.ErrBadField.Error()},
		{"superseded by itself", `{"kind":"superseded","key":"plan@v1","by":"plan@v1"}`, "superseded by its own key"},
		{"turn over 2^53", `{"kind":"assistant","turn":9007199254740993}`, "turn 9007199254740993 is over the limit"},
		{"seq over 2^53", `{"kind":"assistant","seq":9007199254740993}`, "seq 9007199254740993 is over the limit"},
		{"lone surrogate in text", `{"kind":"assistant","text":"caf\ud800"}`, `lone surrogate \ud800 in text`},
		{"lone surrogate in an id", `{"kind":"tool_call","id":"c\udc01"}`, tier.ErrInvalidUTF8.Error()},
		// Hostile input.
		{"huge id", `{"kind":"tool_call","id":"` + strings.Repeat("i", tier.DefaultMaxIDBytes+1) + `"}`, tier.ErrTooLarge.Error()},
		{"huge key", `{"kind":"artifact","key":"` + strings.Repeat("k", 1<<20) + `"}`, tier.ErrTooLarge.Error()},
		{"control character in an id", `{"kind":"tool_call","id":"c\u0000x"}`, tier.ErrBadField.Error()},
		{"escape sequence in a key", `{"kind":"artifact","key":"\u001b[31mred"}`, tier.ErrBadField.Error()},
		{"newline in a name", `{"kind":"open","id":"h","name":"a\nb"}`, tier.ErrBadField.Error()},
		{"session id with a control character", `{"session":"s\u0007","kind":"user"}`, "bad session id"},
		{"session id too long", `{"session":"` + strings.Repeat("s", 300) + `","kind":"user"}`, "bad session id"},
		{"million-digit seq", `{"kind":"assistant","seq":` + strings.Repeat("7", 1e6) + `}`, "field seq of type uint64"},
		{"megabyte time", `{"kind":"assistant","time":"` + strings.Repeat("7", 1<<20) + `"}`, "is not RFC 3339"},
		{"megabyte kind", `{"kind":"` + strings.Repeat("k", 1<<20) + `"}`, tier.ErrUnknownKind.Error()},
		{"megabyte field name", `{"kind":"user","` + strings.Repeat("f", 1<<20) + `":1}`, "unknown field"},
		{"empty session id", `{"session":"","kind":"user","text":"x"}` + "\n" + `{"session":"\u0085","kind":"user"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			file := writeFile(t, "in.jsonl", good+tc.line+"\n"+`{"kind":"assistant","text":"after"}`+"\n")
			db := tempDB(t)
			r := cli(t, "", "replay", "--db", db, "--every", "1", file)
			if tc.want == "" {
				// Cases that are fine on line 3 and bad on line 4.
				wantCode(t, r, exitError)
				if !strings.Contains(r.stderr, file+":4: ") {
					t.Errorf("stderr %q, want %s:4", r.stderr, file)
				}
				return
			}
			wantCode(t, r, exitError)
			if !strings.Contains(r.stderr, "Error: "+file+":3: ") || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %.300q, want %s:3 and %q", r.stderr, file, tc.want)
			}
			if len(r.stderr) > 4096 {
				t.Errorf("the error is %d bytes long: hostile input echoed back", len(r.stderr))
			}
			if !strings.Contains(r.stdout, "replayed files=1 events=2 sessions=1") {
				t.Errorf("summary: %q", r.stdout)
			}
			dump := mustCLI(t, "dump", "--raw", db)
			if !strings.Contains(dump, "head_seq=2 ") || strings.Contains(dump, "after") {
				t.Errorf("not exactly the 2 events before the bad line are stored:\n%.2000s", dump)
			}
			dbtest.MustVerify(t, db)
		})
	}
}

// TestReplay_PathLikeSessionIDs replays sessions whose ids look like paths:
// they are names, nothing more — stored and dumped as given, and no file
// appears anywhere.
func TestReplay_PathLikeSessionIDs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ids := []string{"../x", "/etc/passwd", "a/b", "..", ".", "C:\\Windows", "~/.ssh/id_rsa"}
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(`{"session":` + jsonString(id) + `,"kind":"user","text":"hi"}` + "\n")
	}
	file := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "x.db")
	r := cli(t, "", "replay", "--db", db, file)
	wantCode(t, r, exitOK)
	got := sessionsOf(t, db)
	if len(got) != len(ids) {
		t.Fatalf("sessions %q, want %q", got, ids)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("the directory holds %d entries, want the input and the database", len(entries))
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "x")); err == nil {
		t.Error(`a file "x" appeared beside the directory`)
	}
	for _, id := range ids {
		out := mustCLI(t, "resume", "--db", db, "--session", id)
		if !strings.Contains(out, "session: "+id) {
			t.Errorf("resume of %q: %s", id, out)
		}
	}
	dbtest.MustVerify(t, db)
}

// A turn near 2^64 would make the policy's turn boundaries wrap around: it
// is refused on its line, at once, with the default policy, and nothing is
// stored.
func TestReplay_TurnNearWrap(t *testing.T) {
	t.Parallel()
	for _, turn := range []string{"18446744073709551576", "18446744073709551615", "9007199254740993"} {
		file := writeFile(t, "in.jsonl", `{"session":"s","kind":"user","turn":`+turn+`,"text":"a"}`+"\n"+
			`{"kind":"assistant","text":"b"}`+"\n"+`{"kind":"user","text":"c"}`+"\n")
		db := tempDB(t)
		done := make(chan result, 1)
		go func() { done <- cli(t, "", "replay", "--db", db, file) }()
		var r result
		select {
		case r = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("turn %s: replay still runs after 20s", turn)
		}
		wantCode(t, r, exitError)
		if !strings.Contains(r.stderr, "Error: "+file+":1: ") || !strings.Contains(r.stderr, "turn "+turn+" is over the limit") {
			t.Errorf("turn %s: stderr %q", turn, r.stderr)
		}
		if !strings.Contains(r.stdout, "replayed files=1 events=0 sessions=0 compacted=0") {
			t.Errorf("turn %s: summary %q", turn, r.stdout)
		}
		if _, err := os.Stat(db); !os.IsNotExist(err) {
			t.Errorf("turn %s: the database replay made and stored nothing in is left: %v", turn, err)
		}
	}
	// The largest turn is fine, and so are the turns counted on from it.
	file := writeFile(t, "max.jsonl", `{"session":"s","kind":"user","turn":9007199254740992,"text":"a"}`+"\n"+
		`{"kind":"assistant","text":"b"}`+"\n")
	db := tempDB(t)
	r := cli(t, "", "replay", "--db", db, file)
	wantCode(t, r, exitOK)
	dbtest.MustVerify(t, db)
}
