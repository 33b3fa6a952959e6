//go:build unix

package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-go/strata/debughttp"
)

// verify URL interrupted (Ctrl-C) mid-transfer stops at once and leaves no
// copy of the agent's database (its whole transcript) in TMPDIR.
func TestRemote_VerifyInterrupted(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // not parallel: the signal goes to the whole test binary
	// The test binary must survive the signal whatever verify does with it.
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, os.Interrupt)
	defer signal.Stop(caught)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(debughttp.HandlerHeader, debughttp.HandlerVersion)
		w.Header().Set("Content-Length", "1000000")
		w.Write([]byte(strings.Repeat("x", 1000)))
		w.(http.Flusher).Flush()
		_ = syscall.Kill(os.Getpid(), syscall.SIGINT) // the user presses Ctrl-C
		select {
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	start := time.Now()
	r := cli(t, "", "verify", "--timeout", "5s", srv.URL+"/debug/strata")
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "interrupted") {
		t.Errorf("stderr %q does not say verify was interrupted", r.stderr)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("verify went on for %s after the interrupt", took)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("an interrupted verify URL left %v in TMPDIR", left)
	}
}
