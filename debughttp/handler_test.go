package debughttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/debughttp"
	"github.com/strata-go/strata/dump"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// incident replays the seed's incident into session, compacting every 2
// turns with the extractive summarizer as it goes.
func incident(t testing.TB, db *store.DB, session string) {
	t.Helper()
	dbtest.ReplayIncident(t, db, session, compaction.Extractive{})
}

// serve mounts the handler on a test server.
func serve(t testing.TB, db *store.DB, opts debughttp.Options) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	debughttp.Register(mux, db, opts)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// get fetches url and returns the response and its whole body.
func get(t testing.TB, method, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	if resp.Header.Get(debughttp.HandlerHeader) != debughttp.HandlerVersion {
		t.Errorf("%s %s: no %s header", method, url, debughttp.HandlerHeader)
	}
	return resp, b
}

// view renders fn from one snapshot of db.
func view(t testing.TB, db *store.DB, fn func(w io.Writer, s *store.Snapshot) error) string {
	t.Helper()
	var b bytes.Buffer
	if err := db.View(func(s *store.Snapshot) error { return fn(&b, s) }); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Every endpoint gives the bytes the library (and so the CLI) gives for
// the same database.
func TestHandler_Endpoints(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	incident(t, db, "mig")
	incident(t, db, "other")
	srv := serve(t, db, debughttp.Options{})
	base := srv.URL + debughttp.DefaultPrefix

	for _, tc := range []struct {
		query, contentType string
		render             func(io.Writer, *store.Snapshot, dump.Options) error
		opts               dump.Options
	}{
		{"", "application/json; charset=utf-8", dump.JSON, dump.Options{}},
		{"?raw=1", "application/json; charset=utf-8", dump.JSON, dump.Options{Raw: true}},
		{"?format=json&raw=true&session=other", "application/json; charset=utf-8", dump.JSON, dump.Options{Raw: true, Session: "other"}},
		{"?format=text&raw=1", "text/plain; charset=utf-8", dump.Text, dump.Options{Raw: true}},
		{"?format=dot&session=mig", "text/vnd.graphviz; charset=utf-8", dump.Dot, dump.Options{Session: "mig"}},
		{"?session=mig&from=14&to=20", "application/json; charset=utf-8", dump.JSON, dump.Options{Session: "mig", From: 14, To: 20}},
		{"?format=text&session=other&from=30", "text/plain; charset=utf-8", dump.Text, dump.Options{Session: "other", From: 30}},
	} {
		resp, body := get(t, http.MethodGet, base+"/dump"+tc.query)
		want := view(t, db, func(w io.Writer, s *store.Snapshot) error { return tc.render(w, s, tc.opts) })
		if resp.StatusCode != http.StatusOK || string(body) != want {
			t.Errorf("dump%s: %s, %d bytes, want the library's %d bytes", tc.query, resp.Status, len(body), len(want))
		}
		if got := resp.Header.Get("Content-Type"); got != tc.contentType {
			t.Errorf("dump%s: Content-Type %q", tc.query, got)
		}
		if resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("dump%s: Cache-Control %q", tc.query, resp.Header.Get("Cache-Control"))
		}
	}

	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.MarshalIndent(st, "", "  ")
	if _, body := get(t, http.MethodGet, base+"/stats"); string(body) != string(want)+"\n" {
		t.Errorf("stats:\n%s\nwant\n%s", body, want)
	}
	one, err := db.Stats("other")
	if err != nil {
		t.Fatal(err)
	}
	want, _ = json.MarshalIndent(one, "", "  ")
	if _, body := get(t, http.MethodGet, base+"/stats?session=other"); string(body) != string(want)+"\n" || len(one.Sessions) != 1 {
		t.Errorf("stats?session=other:\n%s\nwant\n%s", body, want)
	}

	for _, marker := range []string{"", "latest", "1", "4"} {
		id := store.Latest
		if n, err := strconv.ParseUint(marker, 10, 64); err == nil {
			id = n
		}
		rc, err := db.Resume("mig", id)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := rc.JSON()
		q := "?session=mig&marker=" + marker
		if _, body := get(t, http.MethodGet, base+"/resume"+q); string(body) != string(want)+"\n" {
			t.Errorf("resume%s:\n%s\nwant\n%s", q, body, want)
		}
		if _, body := get(t, http.MethodGet, base+"/resume"+q+"&format=text"); string(body) != string(rc.Text()) {
			t.Errorf("resume%s text:\n%s\nwant\n%s", q, body, rc.Text())
		}
	}

	// The backup: the announced length, a database that verifies and
	// resumes to the same bytes.
	resp, body := get(t, http.MethodGet, base+"/backup")
	if resp.ContentLength != int64(len(body)) || len(body) == 0 || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("backup: Content-Length %d, %d bytes, %q", resp.ContentLength, len(body), resp.Header.Get("Content-Type"))
	}
	checkBackup(t, db, body)

	// HEAD: the headers, no body.
	resp, body = get(t, http.MethodHead, base+"/backup")
	if resp.StatusCode != http.StatusOK || resp.ContentLength <= 0 || len(body) != 0 {
		t.Errorf("HEAD backup: %s, Content-Length %d, %d bytes", resp.Status, resp.ContentLength, len(body))
	}
	if resp, body = get(t, http.MethodHead, base+"/dump?session=absent"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("HEAD dump of an absent session: %s", resp.Status)
	}

	// The index.
	resp, body = get(t, http.MethodGet, base+"/")
	var idx struct {
		Handler   string            `json:"handler"`
		Sessions  []store.Info      `json:"sessions"`
		Endpoints map[string]string `json:"endpoints"`
	}
	if err := json.Unmarshal(body, &idx); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("index: %s %v\n%s", resp.Status, err, body)
	}
	if idx.Handler != debughttp.HandlerVersion || len(idx.Sessions) != 2 || idx.Sessions[0].Session != "mig" ||
		idx.Sessions[0].Head != 41 || !strings.HasPrefix(idx.Endpoints["backup"], debughttp.DefaultPrefix+"/") {
		t.Errorf("index: %s", body)
	}
	if strings.Contains(string(body), `\u0026`) || !strings.Contains(string(body), "&raw=1") {
		t.Errorf("index: the endpoints' & escaped, unreadable to a person: %s", body)
	}
	// The prefix without its slash is redirected by the mux.
	if resp, _ := get(t, http.MethodGet, base); resp.StatusCode != http.StatusOK || resp.Request.URL.Path != debughttp.DefaultPrefix+"/" {
		t.Errorf("GET %s: %s at %s", debughttp.DefaultPrefix, resp.Status, resp.Request.URL.Path)
	}
}

// checkBackup opens a backup's bytes, verifies them and compares the
// resume of each session with that of db, when db is given.
func checkBackup(t testing.TB, db *store.DB, b []byte) *store.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	dbtest.MustVerify(t, path)
	bk, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bk.Close() })
	if db == nil {
		return bk
	}
	ids, err := db.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		a, err := db.Resume(id, store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		c, err := bk.Resume(id, store.Latest)
		if err != nil {
			t.Fatalf("resume %s from the backup: %v", id, err)
		}
		if a.SHA256() != c.SHA256() {
			t.Errorf("session %s: resume from the backup differs", id)
		}
	}
	return bk
}

// Bad requests get a JSON error with the right status, and nothing else.
func TestHandler_Errors(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	incident(t, db, "mig")
	srv := serve(t, db, debughttp.Options{})
	base := srv.URL + debughttp.DefaultPrefix
	for _, tc := range []struct {
		method, path string
		status       int
		says         string
	}{
		{"GET", "/dump?format=xml", 400, `format=\"xml\": not json, text or dot`},
		{"GET", "/dump?raw=maybe", 400, `raw=\"maybe\"`},
		{"GET", "/dump?raw", 400, `raw=\"\": not 1, 0, true or false`},
		{"GET", "/dump?sesion=mig", 400, "unknown parameter (this endpoint takes format, raw, session, from, to)"},
		{"GET", "/dump?from=3", 400, "a seq range needs session"},
		{"GET", "/dump?session=mig&to=x", 400, `to=\"x\": not a seq`},
		{"GET", "/dump?session=mig&from=0", 400, "not a seq"},
		{"GET", "/dump?session=mig&from=5&to=4", 400, "before from"},
		{"GET", "/dump?session=mig&from=5&format=dot", 400, "not a seq range"},
		{"GET", "/dump?session=a&session=b", 400, "given more than once"},
		{"GET", "/dump?session=bad%01id", 400, "bad session id"},
		{"GET", "/dump?session=absent", 404, "session not found"},
		{"GET", "/dump?%zz", 400, "bad request"},
		{"GET", "/resume", 400, `session=\"\": required`},
		{"GET", "/resume?session=mig&marker=abc", 400, "not a marker id"},
		{"GET", "/resume?session=mig&marker=0", 400, "not a marker id"},
		{"GET", "/resume?session=mig&marker=99", 404, "marker 99"},
		{"GET", "/resume?session=absent", 404, "session not found"},
		{"GET", "/resume?session=mig&format=dot", 400, "not json or text"},
		{"GET", "/dump?format=dot&raw=1", 400, "draws no events"},
		{"GET", "/stats?x=1", 400, "this endpoint takes session"},
		{"GET", "/stats?session=absent", 404, "session not found"},
		{"GET", "/stats?session=bad%01id", 400, "bad session id"},
		{"GET", "/backup?x=1", 400, "unknown parameter"},
		{"GET", "/nope", 404, "no such endpoint"},
		{"GET", "/dump/extra", 404, "no such endpoint"},
		{"POST", "/dump", 405, "POST (GET or HEAD only)"},
		{"DELETE", "/backup", 405, "method not allowed"},
	} {
		resp, body := get(t, tc.method, base+tc.path)
		var e struct {
			Error   string `json:"error"`
			Damaged *bool  `json:"damaged"`
		}
		if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != tc.status || !strings.Contains(string(body), tc.says) || e.Damaged != nil {
			t.Errorf("%s %s: %s %s, want %d saying %s", tc.method, tc.path, resp.Status, body, tc.status, tc.says)
		}
		if resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
			t.Errorf("%s %s: Content-Type %q", tc.method, tc.path, resp.Header.Get("Content-Type"))
		}
		if tc.status == 405 && resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s: Allow %q", tc.method, tc.path, resp.Header.Get("Allow"))
		}
	}

	// A closed database: 503.
	path := filepath.Join(t.TempDir(), "closed.db")
	closed, err := store.Open(path, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	srv2 := serve(t, closed, debughttp.Options{Prefix: "/strata/"})
	closed.Close()
	if resp, body := get(t, "GET", srv2.URL+"/strata/stats"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("closed database: %s %s", resp.Status, body)
	}
}

func TestHandler_Token(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	incident(t, db, "mig")
	srv := serve(t, db, debughttp.Options{Token: "s3cret"})
	url := srv.URL + debughttp.DefaultPrefix + "/stats"
	for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer s3cre", "Bearer s3cret2", "bearer s3cret2", "Basic czNjcmV0", "s3cret"} {
		var h []string
		if auth != "" {
			h = []string{"Authorization", auth}
		}
		resp, body := get(t, "GET", url, h...)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "missing or wrong bearer token") ||
			resp.Header.Get("WWW-Authenticate") != `Bearer realm="strata"` || strings.Contains(string(body), "mig") {
			t.Errorf("Authorization %q: %s %s", auth, resp.Status, body)
		}
	}
	// Even a wrong method is refused as unauthorized first.
	if resp, _ := get(t, "POST", url); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST without the token: %s", resp.Status)
	}
	for _, auth := range []string{"bearer s3cret", "BEARER s3cret"} { // the scheme is case-insensitive
		if resp, _ := get(t, "GET", url, "Authorization", auth); resp.StatusCode != http.StatusOK {
			t.Errorf("Authorization %q: status %d, want 200", auth, resp.StatusCode)
		}
	}
	if resp, body := get(t, "GET", url, "Authorization", "Bearer s3cret"); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"mig"`) {
		t.Errorf("with the token: %s %s", resp.Status, body)
	}
}

// Dumps and backups served while the agent appends (and compacts): each is
// one consistent snapshot, and each backup verifies; once the appends stop,
// a backup resumes to the bytes the live database gives.
func TestHandler_ConcurrentAppends(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, store.Options{NoSync: true})
	incident(t, db, "mig")
	srv := serve(t, db, debughttp.Options{})
	base := srv.URL + debughttp.DefaultPrefix

	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: compaction.Extractive{},
		Policy: compaction.Policy{EveryTurns: 3, Fold: 2}})
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var appended atomic.Int64
	done := make(chan error, 1)
	go func() {
		for i := 0; !stop.Load(); i++ {
			session := "live-" + strconv.Itoa(i%3)
			_, err := db.Append(session,
				tier.Event{Kind: tier.KindUser, Text: "turn " + strconv.Itoa(i)},
				tier.Event{Kind: tier.KindToolCall, ID: "c" + strconv.Itoa(i), Name: "bash", Text: strings.Repeat("x", 2000)},
				tier.Event{Kind: tier.KindToolResult, ID: "c" + strconv.Itoa(i), Text: "ok"},
			)
			if err == nil {
				_, err = comp.Run(context.Background(), session)
			}
			if err != nil {
				done <- err
				return
			}
			appended.Add(3)
		}
		done <- nil
	}()

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		backups [][]byte
	)
	rounds := 6
	if testing.Short() {
		rounds = 3
	}
	// fetch gets url whole, without t.Fatal: it runs off the test goroutine.
	fetch := func(url string) (*http.Response, []byte, error) {
		resp, err := http.Get(url)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				// A raw dump: every session's events number its head_seq.
				resp, body, err := fetch(base + "/dump?raw=1")
				var doc struct {
					Sessions []struct {
						ID     string            `json:"id"`
						Head   uint64            `json:"head_seq"`
						Events []json.RawMessage `json:"events"`
					} `json:"sessions"`
				}
				if err == nil {
					err = json.Unmarshal(body, &doc)
				}
				if err != nil || resp.StatusCode != 200 {
					t.Errorf("dump while appending: %v", err)
					return
				}
				for _, s := range doc.Sessions {
					if uint64(len(s.Events)) != s.Head {
						t.Errorf("dump while appending: session %s: %d events, head_seq %d", s.ID, len(s.Events), s.Head)
					}
				}
				// A backup: whole; it is verified below.
				resp, body, err = fetch(base + "/backup")
				if err != nil || resp.ContentLength != int64(len(body)) {
					t.Errorf("backup while appending: %v, %d bytes", err, len(body))
					return
				}
				mu.Lock()
				backups = append(backups, body)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	time.Sleep(10 * time.Millisecond)
	stop.Store(true)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if appended.Load() == 0 {
		t.Fatal("nothing was appended while serving")
	}
	for _, b := range backups {
		checkBackup(t, nil, b)
	}
	_, body := get(t, "GET", base+"/backup")
	bk := checkBackup(t, db, body)
	ids, _ := bk.Sessions()
	if len(ids) != 4 {
		t.Errorf("final backup: sessions %v", ids)
	}
	t.Logf("%d events appended while serving", appended.Load())
}

// Damage found before an answer begins is a 500 whose body says
// "damaged": true, whatever the message: a client tells damage apart
// without reading the message.
func TestHandler_DamagedSaysSo(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "damaged.db")
	db, err := store.Open(path, store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	const unique = "the head event's text, zq8-unique"
	if _, err := db.Append("s", tier.Event{Kind: tier.KindUser, Text: "first"}, tier.Event{Kind: tier.KindAssistant, Text: unique}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(raw, []byte(unique)) == 0 {
		t.Fatal("the event's text is not in the file")
	}
	for i := 0; ; {
		j := bytes.Index(raw[i:], []byte(unique))
		if j < 0 {
			break
		}
		raw[i+j] ^= 0x01
		i += j + len(unique)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	damaged, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { damaged.Close() })
	base := serve(t, damaged, debughttp.Options{}).URL + debughttp.DefaultPrefix
	for _, path := range []string{"/stats", "/resume?session=s"} {
		resp, body := get(t, http.MethodGet, base+path)
		var e struct {
			Error   string `json:"error"`
			Damaged bool   `json:"damaged"`
		}
		if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != http.StatusInternalServerError || !e.Damaged || e.Error == "" {
			t.Errorf("%s: %s %s", path, resp.Status, body)
		}
	}
}
