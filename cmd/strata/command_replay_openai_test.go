package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/strata-go/strata/internal/dbtest"
)

// fakeModel is an OpenAI-compatible chat-completions server: it copies the
// required claims from the prompt (dropping the dispositions when lossy)
// and records each request's path and Authorization header.
type fakeModel struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
	auth  []string
}

func newFakeModel(t *testing.T, status int, lossy bool) *fakeModel {
	t.Helper()
	m := &fakeModel{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.paths = append(m.paths, r.URL.Path)
		m.auth = append(m.auth, r.Header.Get("Authorization"))
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if status != http.StatusOK {
			w.WriteHeader(status)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`)
			return
		}
		var req struct {
			Model    string
			Messages []struct{ Role, Content string }
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "test-model" || len(req.Messages) == 0 {
			t.Errorf("fake model: request %+v, %v", req, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		prompt := req.Messages[len(req.Messages)-1].Content
		_, block, _ := strings.Cut(prompt, "```json\n")
		block, _, _ = strings.Cut(block, "\n```")
		var claims map[string]json.RawMessage
		if err := json.Unmarshal([]byte(block), &claims); err != nil {
			t.Errorf("fake model: required claims %q: %v", block, err)
		}
		if lossy {
			delete(claims, "dispositions")
		}
		answer, _ := json.Marshal(map[string]any{"narrative": "what the agent did", "claims": claims})
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{
			"finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": string(answer)}}}})
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *fakeModel) requests() (paths, auth []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.paths...), append([]string(nil), m.auth...)
}

// replay --summarizer openai against a faithful model commits every
// compaction; against a lossy one the store refuses and replay goes on;
// the key comes from --api-key-env.
func TestReplay_OpenAI(t *testing.T) {
	t.Setenv("STRATA_TEST_LLM_KEY", "sk-test")
	t.Run("faithful", func(t *testing.T) {
		m := newFakeModel(t, http.StatusOK, false)
		db := tempDB(t)
		out := mustCLI(t, "replay", "--db", db, "--every", "2", "--summarizer", "openai", "--model", "test-model",
			"--base-url", m.URL+"/v1/", "--api-key-env", "STRATA_TEST_LLM_KEY", "--llm-timeout", "10s", "--llm-retries", "1", incident(t))
		if strings.Contains(out, "refused ") || !regexp.MustCompile(`(?m)^compacted session=mig depth=1 seq=1\.\.\d+ node=1 marker=1$`).MatchString(out) {
			t.Errorf("output:\n%s", out)
		}
		n := len(regexp.MustCompile(`(?m)^compacted `).FindAllString(out, -1))
		paths, auth := m.requests()
		if n == 0 || len(paths) != n {
			t.Errorf("%d compactions, %d requests", n, len(paths))
		}
		for i := range paths {
			if paths[i] != "/v1/chat/completions" || auth[i] != "Bearer sk-test" {
				t.Errorf("request %d: %s with Authorization %q", i, paths[i], auth[i])
			}
		}
		r := resume(t, db, "mig")
		if r.Source != "marker" || !strings.Contains(r.Context, keyRejected) || !strings.Contains(r.Context, "what the agent did") {
			t.Errorf("resume: %+v", r)
		}
		dump := mustCLI(t, "dump", "--json", db)
		if !regexp.MustCompile(`"summarizer":\s*"openai:test-model"`).MatchString(dump) {
			t.Errorf("dump does not name the summarizer:\n%.2000s", dump)
		}
		dbtest.MustVerify(t, db)
	})
	t.Run("lossy", func(t *testing.T) {
		m := newFakeModel(t, http.StatusOK, true)
		db := tempDB(t)
		out := mustCLI(t, "replay", "--db", db, "--every", "2", "--summarizer", "openai", "--model", "test-model",
			"--base-url", m.URL+"/v1", incident(t))
		if !regexp.MustCompile(`(?m)^refused session=mig depth=1 seq=\d+\.\.\d+ checkpoint=\d+ reasons=.*retention:` + regexp.QuoteMeta(keyRejected)).MatchString(out) {
			t.Errorf("no refusal for %s:\n%s", keyRejected, out)
		}
		dbtest.MustVerify(t, db)
	})
	t.Run("garbage", func(t *testing.T) {
		// Prose where JSON was asked for: each compaction is refused with
		// the reason, and replay goes on to the end.
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{
				"finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "Sure! The agent migrated the database."}}}})
		}))
		t.Cleanup(srv.Close)
		db := tempDB(t)
		out := mustCLI(t, "replay", "--db", db, "--every", "2", "--summarizer", "openai", "--model", "test-model",
			"--base-url", srv.URL+"/v1", "--llm-retries", "0", incident(t))
		if !regexp.MustCompile(`(?m)^refused session=mig depth=1 seq=1\.\.\d+ checkpoint=\d+ reasons=output:invalid_json$`).MatchString(out) ||
			strings.Contains(out, "compacted ") || !strings.Contains(out, "replayed files=1 events=41") {
			t.Errorf("output:\n%s", out)
		}
		if stats := mustCLI(t, "stats", db); !strings.Contains(stats, "output=") || strings.Contains(stats, " output=0") {
			t.Errorf("stats do not count the output refusals:\n%s", stats)
		}
		dbtest.MustVerify(t, db)
	})
	t.Run("rate limited", func(t *testing.T) {
		// The first request is answered 429 with Retry-After-Ms: stderr
		// says the attempt, the status and the wait, and the retry
		// commits.
		m := newFakeModel(t, http.StatusOK, false)
		target, _ := url.Parse(m.URL)
		proxy := httputil.NewSingleHostReverseProxy(target)
		var once sync.Once
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			limited := false
			once.Do(func() { limited = true })
			if limited {
				w.Header().Set("Retry-After-Ms", "20")
				w.WriteHeader(http.StatusTooManyRequests)
				io.WriteString(w, `{"error":{"message":"Rate limit reached"}}`)
				return
			}
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		db := tempDB(t)
		r := cli(t, "", "replay", "--db", db, "--every", "2", "--summarizer", "openai", "--model", "test-model",
			"--base-url", srv.URL+"/v1", "--llm-retries", "2", incident(t))
		wantCode(t, r, exitOK)
		want := "replay: model test-model: attempt 1 of 3 failed: openai: server returned an error status: POST " + srv.URL +
			"/v1/chat/completions: 429 Too Many Requests: Rate limit reached; retrying in 20ms (the server's Retry-After)\n"
		if !strings.Contains(r.stderr, want) || strings.Count(r.stderr, "retrying") != 1 {
			t.Errorf("stderr:\n%s\nwant the line %q", r.stderr, want)
		}
		if strings.Contains(r.stdout, "refused ") || !strings.Contains(r.stdout, "compacted session=mig depth=1 seq=1..") {
			t.Errorf("stdout:\n%s", r.stdout)
		}
	})
	t.Run("401", func(t *testing.T) {
		m := newFakeModel(t, http.StatusUnauthorized, false)
		db := tempDB(t)
		r := cli(t, "", "replay", "--db", db, "--every", "2", "--summarizer", "openai", "--model", "test-model",
			"--base-url", m.URL+"/v1", "--api-key-env", "STRATA_TEST_LLM_KEY", incident(t))
		wantCode(t, r, exitError)
		if !strings.Contains(r.stderr, "401 Unauthorized: Incorrect API key provided") || !strings.Contains(r.stderr, "Hint: ") ||
			!strings.Contains(r.stderr, "seq 1..") {
			t.Errorf("stderr:\n%s", r.stderr)
		}
		if strings.Contains(r.stderr, "sk-test") {
			t.Errorf("the API key is in the error:\n%s", r.stderr)
		}
		if paths, _ := m.requests(); len(paths) != 1 {
			t.Errorf("%d requests after a 401, want 1", len(paths))
		}
		if !strings.Contains(r.stdout, "replayed files=1 events=") {
			t.Errorf("no closing summary:\n%s", r.stdout)
		}
		dbtest.MustVerify(t, db)
	})
}

// The openai flags: required with --summarizer openai, refused without it,
// and checked; every mistake is bad usage (exit 2) and sends nothing.
func TestReplay_OpenAI_Usage(t *testing.T) {
	t.Parallel()
	m := newFakeModel(t, http.StatusOK, false)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--summarizer", "openai", "--base-url", m.URL}, "needs --model and --base-url"},
		{[]string{"--summarizer", "openai", "--model", "m"}, "needs --model and --base-url"},
		{[]string{"--model", "m", "--base-url", m.URL}, "apply only to --summarizer openai"},
		{[]string{"--summarizer", "lossy", "--llm-retries", "2"}, "apply only to --summarizer openai"},
		{[]string{"--summarizer", "openai", "--model", "m", "--base-url", "localhost:11434"}, "scheme must be http or https"},
		{[]string{"--summarizer", "openai", "--model", "m", "--base-url", m.URL, "--llm-timeout", "0s"}, "--llm-timeout must be positive"},
		{[]string{"--summarizer", "openai", "--model", "m", "--base-url", m.URL, "--llm-retries", "-1"}, "--llm-retries must be"},
		{[]string{"--summarizer", "openai", "--model", "m", "--base-url", m.URL, "--api-key-env", "STRATA_TEST_NO_SUCH_VAR"}, "STRATA_TEST_NO_SUCH_VAR is unset or empty"},
	} {
		args := append(append([]string{"replay", "--db", tempDB(t)}, tc.args...), incident(t))
		r := cli(t, "", args...)
		wantCode(t, r, exitUsage, args...)
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: stderr %q, want %q", tc.args, r.stderr, tc.want)
		}
	}
	if paths, _ := m.requests(); len(paths) != 0 {
		t.Errorf("%d requests sent on bad usage", len(paths))
	}
}
