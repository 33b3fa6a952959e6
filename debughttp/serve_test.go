package debughttp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/debughttp"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
)

// TestListen_LoopbackByDefault: no address means 127.0.0.1:6060; an address
// other hosts could reach is refused without a token, taken with one.
func TestListen_LoopbackByDefault(t *testing.T) {
	if ln, err := debughttp.Listen("", debughttp.Options{}); err == nil {
		if got := ln.Addr().String(); got != debughttp.DefaultAddr {
			t.Errorf("Listen(\"\") on %s, want %s", got, debughttp.DefaultAddr)
		}
		ln.Close()
	} else if !strings.Contains(err.Error(), debughttp.DefaultAddr) {
		t.Errorf("Listen(\"\") = %v, want it to name %s", err, debughttp.DefaultAddr)
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		ln, err := debughttp.Listen(addr, debughttp.Options{})
		if err != nil {
			t.Fatalf("Listen(%q) = %v", addr, err)
		}
		ln.Close()
	}
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		if _, err := debughttp.Listen(addr, debughttp.Options{}); !errors.Is(err, debughttp.ErrNotLoopback) {
			t.Errorf("Listen(%q) without a token = %v, want ErrNotLoopback", addr, err)
		}
	}
	ln, err := debughttp.Listen(":0", debughttp.Options{Token: "s3cret"})
	if err != nil {
		t.Fatalf("Listen(\":0\") with a token = %v", err)
	}
	ln.Close()
	if _, err := debughttp.Listen("no-port", debughttp.Options{}); err == nil {
		t.Error("Listen of an address without a port succeeded")
	}
}

// TestServe_UntilCancelled serves a database, answers a request, and
// returns nil once its context is cancelled.
func TestServe_UntilCancelled(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true})
	incident(t, db, "mig")
	ln, err := debughttp.Listen("127.0.0.1:0", debughttp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- debughttp.Serve(ctx, ln, db, debughttp.Options{}) }()
	resp, err := http.Get("http://" + ln.Addr().String() + debughttp.DefaultPrefix + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get(debughttp.HandlerHeader) == "" || !strings.Contains(string(body), `"mig"`) {
		t.Errorf("GET stats: %s %q", resp.Status, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
}
