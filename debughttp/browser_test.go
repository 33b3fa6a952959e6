package debughttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// screenshots, when set, is a directory the browser tests write their
// full-page screenshots to, as TestName.png.
var screenshots = flag.String("strata.screenshots", "", "write the browser tests' full-page screenshots (PNG) to this directory")

// browserTimeout bounds a whole browser test: the browser's start, the
// page's loads and every wait; waitTimeout bounds one wait, which polls the
// page (none sleeps). Both are generous: a loaded machine is slow, and a
// test that passes waits for as long as the page takes, not for these.
const (
	browserTimeout = 3 * time.Minute
	waitTimeout    = 45 * time.Second
)

// browsers are where findBrowser looks, in order: a path, then names on PATH.
var browsers = []string{"/usr/bin/chromium", "chromium", "google-chrome"}

// findBrowser returns a Chromium to drive, or skips the test naming where
// it looked.
func findBrowser(t *testing.T) string {
	t.Helper()
	for _, b := range browsers {
		if p, err := exec.LookPath(b); err == nil {
			return p
		}
	}
	t.Skipf("no browser for the page's tests: looked for %s (on PATH); apt-get install chromium", strings.Join(browsers, ", "))
	return ""
}

// newBrowser starts a headless browser with a fresh profile and returns
// the context of one tab in it; the browser is stopped at the end of the
// test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	exe := findBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), browserTimeout)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	// Start the browser now: a failure to start is reported as one.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return bctx
}

// waitFor polls the page until the JavaScript expression is true, and
// fails the test with what the page shows when it never is.
func waitFor(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	for {
		_, err := chromedp.Run(wctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)))
		if err == nil {
			return
		}
		if wctx.Err() == nil && strings.Contains(err.Error(), "Cannot find context with specified id") {
			// A navigation replaced the document the poll ran in (a
			// load still settling): poll the new one.
			continue
		}
		t.Fatalf("the page never showed %s (%s): %v\npage text:\n%s", what, expr, err, pageText(ctx))
	}
}

// pageText returns the page's text, or why it cannot, for a failure message.
func pageText(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body.innerText"))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}

// textOf is the JavaScript expression of an element's text ("" when absent).
func textOf(selector string) string {
	return "(document.querySelector(" + js(selector) + ")?.textContent ?? '')"
}

// screenshot takes a full-page PNG of the page, checks that it is one, and
// writes it to the -strata.screenshots directory when that is set.
func screenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil || cfg.Width < 1000 || cfg.Height < 500 {
		t.Fatalf("screenshot: %d bytes, %dx%d, %v", len(b), cfg.Width, cfg.Height, err)
	}
	if *screenshots == "" {
		return
	}
	path := filepath.Join(*screenshots, t.Name()+".png")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%dx%d, %d bytes)", path, cfg.Width, cfg.Height, len(b))
}
