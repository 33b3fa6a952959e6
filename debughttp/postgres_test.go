package debughttp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/debughttp"
	"github.com/strata-go/strata/dump"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/internal/pgtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// The backup of a store in PostgreSQL is a new bbolt file of every session
// from the request's snapshot, the one BackupFile (strata backup URL FILE)
// writes: whole (its Content-Length), it verifies, resumes every session to
// the server's sha256 and dumps as that file does. It is built in a
// temporary directory that is gone when the answer is — also after a HEAD,
// a damaged row and a client gone before it was built.
func TestHandler_BackupPostgres(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // not parallel: the backup is built there
	url := pgtest.URL(t)
	db, err := store.Open(url, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	incident(t, db, "mig")
	lossy, err := compaction.NewLossy(compaction.DropNegatives, compaction.DropArtifacts)
	if err != nil {
		t.Fatal(err)
	}
	dbtest.ReplayIncident(t, db, "lossy", lossy)
	if _, err := db.Append("raw-only", tier.Event{Kind: tier.KindUser, Text: "no compaction here"}); err != nil {
		t.Fatal(err)
	}
	h := debughttp.New(db, debughttp.Options{})
	request := func(ctx context.Context, method string) *httptest.ResponseRecorder {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, method, debughttp.DefaultPrefix+"/backup", nil))
		if left, err := os.ReadDir(tmp); err != nil || len(left) != 0 {
			t.Errorf("%s backup left %v in TMPDIR (%v)", method, left, err)
		}
		return rec
	}

	rec := request(context.Background(), http.MethodGet)
	body := rec.Body.Bytes()
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Length") != strconv.Itoa(len(body)) || len(body) == 0 ||
		rec.Header().Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("backup: %d, Content-Length %s, %d bytes, %q\n%.300s", rec.Code, rec.Header().Get("Content-Length"),
			len(body), rec.Header().Get("Content-Type"), body)
	}
	bk := checkBackup(t, db, body) // verifies; every session resumes to the server's sha256
	if ids, _ := bk.Sessions(); len(ids) != 3 {
		t.Errorf("the backup holds sessions %v", ids)
	}
	file := filepath.Join(t.TempDir(), "backupfile.db")
	if _, err := db.BackupFile(file); err != nil {
		t.Fatal(err)
	}
	byFile, err := store.Open(file, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { byFile.Close() })
	raw := func(d *store.DB) string {
		return view(t, d, func(w io.Writer, s *store.Snapshot) error { return dump.JSON(w, s, dump.Options{Raw: true}) })
	}
	if got, want := raw(bk), raw(byFile); got != want {
		t.Errorf("the served backup dumps %d bytes, BackupFile's file %d", len(got), len(want))
	}

	rec = request(context.Background(), http.MethodHead)
	if n := rec.Header().Get("Content-Length"); rec.Code != http.StatusOK || n == "" || n == "0" || rec.Body.Len() != 0 {
		t.Errorf("HEAD backup: %d, Content-Length %q, %d bytes", rec.Code, n, rec.Body.Len())
	}

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if rec = request(gone, http.MethodGet); rec.Code == http.StatusOK {
		t.Errorf("backup for a client gone: %d, %d bytes", rec.Code, rec.Body.Len())
	}

	pgtest.Exec(t, url, `UPDATE strata_events SET value = value || '\x00'::bytea WHERE session = 'lossy' AND seq = 3`)
	rec = request(context.Background(), http.MethodGet)
	var e struct {
		Error   string `json:"error"`
		Damaged bool   `json:"damaged"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != http.StatusInternalServerError || !e.Damaged {
		t.Errorf("backup of a damaged row: %d %s", rec.Code, rec.Body.Bytes())
	}
}
