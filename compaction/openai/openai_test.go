package openai_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/compaction/openai"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
)

// input is a two-event span with one call open at its end.
func input() *compaction.Input {
	return &compaction.Input{
		Session: "s1", Depth: 1, From: 1, To: 2, Budget: 200,
		Events: []tier.Event{
			{Seq: 1, Turn: 1, Kind: tier.KindUser, Text: "List the\nmigrations."},
			{Seq: 2, Turn: 1, Kind: tier.KindToolCall, ID: "c1", Name: "bash", Text: "ls migrations/"},
		},
		Required: tier.Required{From: 1, To: 2, Unresolved: []tier.Open{{ID: "c1", Kind: tier.KindToolCall, Name: "bash", Seq: 2}}},
	}
}

func good(t testing.TB, r *request) reply {
	return reply{Body: completion(summaryJSON("listed the migrations", requiredClaims(t, r.User)), "stop")}
}

// The request: POST to {base}/chat/completions however the base is
// written, the model, a system and a user message holding the span and the
// required claims, JSON mode, and optional fields only when set.
func TestSummarizer_Summarize_RequestShape(t *testing.T) {
	t.Setenv(openai.EnvAPIKey, "")
	t.Setenv(openai.EnvOpenAIAPIKey, "")
	f := newFake(t, func(_ int, r *request) reply { return good(t, r) })
	for _, tc := range []struct{ base, path string }{
		{f.URL + "/v1", "/v1/chat/completions"},
		{f.URL + "/v1/", "/v1/chat/completions"},
		{f.URL, "/chat/completions"},
		{f.URL + "/", "/chat/completions"},
		{f.URL + "/v1/chat/completions", "/v1/chat/completions"},
	} {
		sum, _ := newSummarizer(t, f, openai.Config{BaseURL: tc.base})
		if got := sum.Endpoint(); got != f.URL+tc.path {
			t.Errorf("base %s: endpoint %s, want %s", tc.base, got, f.URL+tc.path)
		}
		if _, err := sum.Summarize(context.Background(), input()); err != nil {
			t.Fatalf("base %s: %v", tc.base, err)
		}
		r := f.requests()[len(f.requests())-1]
		if r.Path != tc.path || r.Method != http.MethodPost {
			t.Errorf("base %s: %s %s, want POST %s", tc.base, r.Method, r.Path, tc.path)
		}
	}

	r := f.requests()[0]
	if r.Body["model"] != "test-model" || r.Body["stream"] != false {
		t.Errorf("model %v stream %v", r.Body["model"], r.Body["stream"])
	}
	if rf, _ := r.Body["response_format"].(map[string]any); rf["type"] != "json_object" {
		t.Errorf("response_format %v, want json_object", r.Body["response_format"])
	}
	for _, k := range []string{"temperature", "max_tokens"} {
		if _, ok := r.Body[k]; ok {
			t.Errorf("%s sent though not set", k)
		}
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if a, ok := r.Header["Authorization"]; ok {
		t.Errorf("Authorization %q sent with no key", a)
	}
	if !strings.Contains(r.System, `"narrative"`) || !strings.Contains(r.System, `"dispositions"`) || !strings.Contains(r.System, "JSON") {
		t.Errorf("the system prompt does not give the schema:\n%s", r.System)
	}
	for _, want := range []string{
		"Session: s1", "seq 1..2", "200 tokens",
		"[1 t1] user: List the migrations.", "[2 t1] tool_call c1 (bash): ls migrations/",
		`"id": "c1"`, `"kind": "tool_call"`,
	} {
		if !strings.Contains(r.User, want) {
			t.Errorf("the user prompt lacks %q:\n%s", want, r.User)
		}
	}
	if c := requiredClaims(t, r.User); len(c.Unresolved) != 1 || c.Unresolved[0].ID != "c1" {
		t.Errorf("required claims in the prompt: %+v", c)
	}

	temp := 0.2
	sum, _ := newSummarizer(t, f, openai.Config{APIKey: "sk-test", Temperature: &temp, MaxTokens: 900})
	if _, err := sum.Summarize(context.Background(), input()); err != nil {
		t.Fatal(err)
	}
	r = f.requests()[len(f.requests())-1]
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization %q, want Bearer sk-test", got)
	}
	if r.Body["temperature"] != 0.2 || r.Body["max_tokens"] != float64(900) {
		t.Errorf("temperature %v max_tokens %v", r.Body["temperature"], r.Body["max_tokens"])
	}
}

// The key comes from APIKey, else the variable APIKeyEnv names, else
// STRATA_API_KEY, else OPENAI_API_KEY.
func TestNew_APIKeyFromEnvironment(t *testing.T) {
	f := newFake(t, func(_ int, r *request) reply { return good(t, r) })
	auth := func(cfg openai.Config) string {
		t.Helper()
		sum, _ := newSummarizer(t, f, cfg)
		if _, err := sum.Summarize(context.Background(), input()); err != nil {
			t.Fatal(err)
		}
		return f.requests()[len(f.requests())-1].Header.Get("Authorization")
	}
	t.Setenv(openai.EnvAPIKey, "")
	t.Setenv(openai.EnvOpenAIAPIKey, "sk-openai")
	if got := auth(openai.Config{}); got != "Bearer sk-openai" {
		t.Errorf("from OPENAI_API_KEY: %q", got)
	}
	t.Setenv(openai.EnvAPIKey, "sk-strata")
	if got := auth(openai.Config{}); got != "Bearer sk-strata" {
		t.Errorf("STRATA_API_KEY first: %q", got)
	}
	t.Setenv("MY_LLM_KEY", "sk-mine")
	if got := auth(openai.Config{APIKeyEnv: "MY_LLM_KEY"}); got != "Bearer sk-mine" {
		t.Errorf("from APIKeyEnv: %q", got)
	}
	if got := auth(openai.Config{APIKey: "sk-given", APIKeyEnv: "MY_LLM_KEY"}); got != "Bearer sk-given" {
		t.Errorf("APIKey first: %q", got)
	}
	_, err := openai.New(openai.Config{BaseURL: f.URL, Model: "m", APIKeyEnv: "STRATA_TEST_UNSET_KEY"})
	if !errors.Is(err, openai.ErrNoAPIKey) || !strings.Contains(err.Error(), "STRATA_TEST_UNSET_KEY") {
		t.Errorf("New with an unset APIKeyEnv: %v", err)
	}
}

func TestNew_InvalidConfig(t *testing.T) {
	neg := -0.5
	for _, tc := range []struct {
		cfg   openai.Config
		field string
	}{
		{openai.Config{Model: "m"}, "BaseURL"},
		{openai.Config{BaseURL: "localhost:11434/v1", Model: "m"}, "BaseURL"},
		{openai.Config{BaseURL: "ftp://example.com/v1", Model: "m"}, "BaseURL"},
		{openai.Config{BaseURL: "http:///v1", Model: "m"}, "BaseURL"},
		{openai.Config{BaseURL: "http://h/v1?x=1", Model: "m"}, "BaseURL"},
		{openai.Config{BaseURL: "http://user:pw@h/v1", Model: "m"}, "BaseURL"},
		{openai.Config{BaseURL: "http://h/v1"}, "Model"},
		{openai.Config{BaseURL: "http://h/v1", Model: " m"}, "Model"},
		{openai.Config{BaseURL: "http://h/v1", Model: "m", Timeout: -time.Second}, "Timeout"},
		{openai.Config{BaseURL: "http://h/v1", Model: "m", Retries: -1}, "Retries"},
		{openai.Config{BaseURL: "http://h/v1", Model: "m", Retries: openai.MaxRetries + 1}, "Retries"},
		{openai.Config{BaseURL: "http://h/v1", Model: "m", MaxTokens: -1}, "MaxTokens"},
		{openai.Config{BaseURL: "http://h/v1", Model: "m", Temperature: &neg}, "Temperature"},
		{openai.Config{BaseURL: "http://h/v1", Model: "m", MaxBackoff: -1}, "MaxBackoff"},
	} {
		_, err := openai.New(tc.cfg)
		var ce *openai.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, openai.ErrInvalidConfig) {
			t.Errorf("New(%+v): %v, want a ConfigError on %s", tc.cfg, err, tc.field)
		}
	}
}

// A server slower than Timeout: each request is cut off, retried, and the
// error says it timed out and how many attempts were made.
func TestSummarizer_Summarize_Timeout(t *testing.T) {
	f := newFake(t, func(int, *request) reply { return reply{Hang: 10 * time.Second} })
	sum, _ := newSummarizer(t, f, openai.Config{Timeout: 50 * time.Millisecond, Retries: 1})
	start := time.Now()
	_, err := sum.Summarize(context.Background(), input())
	if !errors.Is(err, openai.ErrTimeout) || !errors.Is(err, openai.ErrGaveUp) {
		t.Fatalf("Summarize: %v, want a timeout and gave up", err)
	}
	if !strings.Contains(err.Error(), "after 2 attempts") || !strings.Contains(err.Error(), "50ms") {
		t.Errorf("error %q does not name the attempts and the timeout", err)
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s: the timeout did not cut the requests", d)
	}
}

// 429 with Retry-After: the wait is the server's, capped at MaxBackoff.
func TestSummarizer_Summarize_RateLimited(t *testing.T) {
	for _, tc := range []struct {
		header, value string
		maxBackoff    time.Duration
		want          time.Duration
	}{
		{"Retry-After", "2", 0, 2 * time.Second},
		{"Retry-After", "3600", 5 * time.Second, 5 * time.Second},
		{"Retry-After-Ms", "150", 0, 150 * time.Millisecond},
	} {
		f := newFake(t, func(i int, r *request) reply {
			if i == 0 {
				return reply{Status: 429, Header: map[string]string{tc.header: tc.value},
					Body: `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`}
			}
			return good(t, r)
		})
		sum, waits := newSummarizer(t, f, openai.Config{Retries: 2, MaxBackoff: tc.maxBackoff})
		out, err := sum.Summarize(context.Background(), input())
		if err != nil {
			t.Fatalf("%s %s: %v", tc.header, tc.value, err)
		}
		if out.Narrative != "listed the migrations" || len(out.Claims.Unresolved) != 1 {
			t.Errorf("output %+v", out)
		}
		if w := waits.all(); len(w) != 1 || w[0] != tc.want {
			t.Errorf("%s %s: waits %v, want [%s]", tc.header, tc.value, w, tc.want)
		}
		if n := len(f.requests()); n != 2 {
			t.Errorf("%d requests, want 2", n)
		}
	}
}

// 500 then success: one jittered backoff, then the answer.
func TestSummarizer_Summarize_ServerErrorThenSuccess(t *testing.T) {
	f := newFake(t, func(i int, r *request) reply {
		if i == 0 {
			return reply{Status: 500, Body: `{"error":{"message":"internal error","type":"server_error"}}`}
		}
		return good(t, r)
	})
	sum, waits := newSummarizer(t, f, openai.Config{Retries: 1, BaseBackoff: 100 * time.Millisecond})
	if _, err := sum.Summarize(context.Background(), input()); err != nil {
		t.Fatal(err)
	}
	if w := waits.all(); len(w) != 1 || w[0] < 50*time.Millisecond || w[0] > 100*time.Millisecond {
		t.Errorf("waits %v, want one in [50ms, 100ms]", w)
	}
}

// 500 forever: Retries+1 attempts, backoffs doubling (jittered) up to the
// cap, and an error naming the attempts and the last status.
func TestSummarizer_Summarize_ServerErrorForever(t *testing.T) {
	f := newFake(t, func(int, *request) reply {
		return reply{Status: 503, Header: map[string]string{"Content-Type": "text/html"}, Body: "<html><body>Service Unavailable</body></html>"}
	})
	base, maxB := 100*time.Millisecond, 300*time.Millisecond
	sum, waits := newSummarizer(t, f, openai.Config{Retries: 3, BaseBackoff: base, MaxBackoff: maxB})
	_, err := sum.Summarize(context.Background(), input())
	var ge *openai.GiveUpError
	var se *openai.StatusError
	if !errors.As(err, &ge) || ge.Attempts != 4 || !errors.As(err, &se) || se.StatusCode != 503 {
		t.Fatalf("Summarize: %v, want a GiveUpError after 4 attempts on 503", err)
	}
	if !strings.Contains(err.Error(), "gave up after 4 attempts") || !strings.Contains(err.Error(), "503 Service Unavailable: <html><body>Service Unavailable</body></html>") {
		t.Errorf("error %q", err)
	}
	if n := len(f.requests()); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
	w := waits.all()
	bounds := []time.Duration{base, 2 * base, maxB}
	if len(w) != 3 {
		t.Fatalf("waits %v, want 3", w)
	}
	for i, d := range w {
		if d < bounds[i]/2 || d > bounds[i] {
			t.Errorf("wait %d is %s, want in [%s, %s]", i+1, d, bounds[i]/2, bounds[i])
		}
	}
}

// 401 and other 4xx: no retry, the status and the server's message.
func TestSummarizer_Summarize_ClientErrorNoRetry(t *testing.T) {
	t.Setenv(openai.EnvAPIKey, "")
	t.Setenv(openai.EnvOpenAIAPIKey, "")
	for _, tc := range []struct {
		status int
		body   string
		want   string
		hint   string
	}{
		{401, `{"error":{"message":"Incorrect API key provided: sk-bad.","type":"invalid_request_error","code":"invalid_api_key"}}`,
			"401 Unauthorized: Incorrect API key provided: sk-bad.", "no API key was sent"},
		{404, `{"error":{"message":"model \"nope\" not found, try pulling it first","type":"api_error"}}`,
			"404 Not Found: model \"nope\" not found, try pulling it first", "check the base URL"},
		{400, `{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","code":400}`,
			"400 Bad Request: This model's maximum context length is 4096 tokens.", ""},
	} {
		f := newFake(t, func(int, *request) reply { return reply{Status: tc.status, Body: tc.body} })
		sum, waits := newSummarizer(t, f, openai.Config{Retries: 3})
		_, err := sum.Summarize(context.Background(), input())
		var se *openai.StatusError
		if !errors.As(err, &se) || se.StatusCode != tc.status || errors.Is(err, openai.ErrGaveUp) {
			t.Fatalf("%d: %v, want a StatusError without retries", tc.status, err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d: %q lacks %q", tc.status, err, tc.want)
		}
		if tc.hint != "" && !strings.Contains(strings.Join(errors.GetAllHints(err), "\n"), tc.hint) {
			t.Errorf("%d: hints %q lack %q", tc.status, errors.GetAllHints(err), tc.hint)
		}
		if n := len(f.requests()); n != 1 || len(waits.all()) != 0 {
			t.Errorf("%d: %d requests and %d waits, want 1 and 0", tc.status, n, len(waits.all()))
		}
	}
}

// A server that rejects response_format is asked again at once without
// it, and never with it again.
func TestSummarizer_Summarize_JSONModeFallback(t *testing.T) {
	f := newFake(t, func(_ int, r *request) reply {
		if _, ok := r.Body["response_format"]; ok {
			return reply{Status: 400, Body: `{"error":{"message":"Unrecognized request argument supplied: response_format","type":"invalid_request_error"}}`}
		}
		return good(t, r)
	})
	sum, waits := newSummarizer(t, f, openai.Config{})
	for range 2 {
		if _, err := sum.Summarize(context.Background(), input()); err != nil {
			t.Fatal(err)
		}
	}
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3 (refused, fallback, then without)", len(reqs))
	}
	for i, r := range reqs {
		_, has := r.Body["response_format"]
		if has != (i == 0) {
			t.Errorf("request %d: response_format sent = %v", i, has)
		}
	}
	if len(waits.all()) != 0 {
		t.Errorf("waits %v before the fallback", waits.all())
	}
}

// A connection refused is retried and then named.
func TestSummarizer_Summarize_ConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := &sleeps{}
	sum, err := openai.New(openai.Config{BaseURL: "http://" + addr + "/v1", Model: "m", Retries: 2, Sleep: s.sleep})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sum.Summarize(context.Background(), input())
	if !errors.Is(err, openai.ErrConnection) || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Fatalf("Summarize: %v", err)
	}
	if !strings.Contains(strings.Join(errors.GetAllHints(err), "\n"), "is the server running") {
		t.Errorf("hints %q", errors.GetAllHints(err))
	}
}

// Cancelling the caller's context ends Summarize during a backoff or a
// request, with the context's error, not a retry.
func TestSummarizer_Summarize_Cancel(t *testing.T) {
	f := newFake(t, func(i int, r *request) reply {
		if i == 0 {
			return reply{Status: 500, Body: "boom"}
		}
		return reply{Hang: 10 * time.Second}
	})
	for _, tc := range []struct {
		name    string
		backoff time.Duration
	}{{"during the backoff", 10 * time.Second}, {"during a request", time.Millisecond}} {
		sum, err := openai.New(openai.Config{BaseURL: f.URL, Model: "m", Retries: 5, BaseBackoff: tc.backoff})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		_, err = sum.Summarize(ctx, input())
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, openai.ErrGaveUp) || errors.Is(err, openai.ErrTimeout) {
			t.Errorf("%s: %v, want the context's error", tc.name, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %s", tc.name, d)
		}
	}
}

// Unusable answers at the transport level: an oversized body, a 200 with an
// error object; and answers that parse: fenced, after prose, or with a
// <think> block before them.
func TestSummarizer_Summarize_Answers(t *testing.T) {
	obj := `{"narrative":"listed the migrations","claims":{"unresolved":[{"id":"c1","kind":"TOOL_CALL","name":"bash"}]}}`
	for _, tc := range []struct {
		name   string
		body   string
		reason openai.OutputReason // "" = a good summary
	}{
		{"oversized", completion(`{"narrative":"`+strings.Repeat("x", 4096)+`"}`, "stop"), openai.ReasonBadResponse},
		{"200 with an error", `{"error":{"message":"model overloaded"}}`, openai.ReasonBadResponse},
		{"empty content", completion("", "stop"), openai.ReasonEmpty},
		{"content filter", completion(obj, "content_filter"), openai.ReasonFiltered},
		{"bare", completion(obj, "stop"), ""},
		{"fenced", completion("Here is the summary:\n```json\n"+obj+"\n```\nLet me know.", "stop"), ""},
		{"prose around", completion("Summary: "+obj+" — done.", "stop"), ""},
		{"think block", completion("<think>The user wants {json}. Fine.</think>\n"+obj, "stop"), ""},
		{"content parts", `{"choices":[{"finish_reason":"stop","message":{"content":[{"type":"text","text":` + quote(obj) + `}]}}]}`, ""},
	} {
		f := newFake(t, func(int, *request) reply { return reply{Body: tc.body} })
		sum, _ := newSummarizer(t, f, openai.Config{MaxResponseBytes: 2048})
		out, err := sum.Summarize(context.Background(), input())
		if tc.reason == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			want := tier.Claims{Unresolved: []tier.Open{{ID: "c1", Kind: tier.KindToolCall, Name: "bash"}}}
			if out.Narrative != "listed the migrations" || len(out.Claims.Unresolved) != 1 || out.Claims.Unresolved[0] != want.Unresolved[0] {
				t.Errorf("%s: output %+v", tc.name, out)
			}
			continue
		}
		var oe *openai.OutputError
		if !errors.As(err, &oe) || oe.Reason != tc.reason {
			t.Errorf("%s: %v, want an OutputError %s", tc.name, err, tc.reason)
		}
	}
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r == '"' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// The prompt of a retry attempt names what the refused summary lacked,
// with the detail the store gave.
func TestSummarizer_Summarize_MissingInPrompt(t *testing.T) {
	f := newFake(t, func(_ int, r *request) reply { return good(t, r) })
	sum, _ := newSummarizer(t, f, openai.Config{})
	in := input()
	in.Attempt = 1
	in.Missing = []marker.Failure{{Class: marker.ClassClosure, Item: "c1", Detail: "open at seq 2 (since seq 2) but not claimed UNRESOLVED"}}
	if _, err := sum.Summarize(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	u := f.requests()[0].User
	if !strings.Contains(u, "REFUSED") || !strings.Contains(u, "- closure:c1 (open at seq 2 (since seq 2) but not claimed UNRESOLVED)") {
		t.Errorf("the prompt does not say what was missing:\n%s", u)
	}
}

// A span over MaxSpanBytes is shown by its start and end, and says how
// much was left out.
func TestSummarizer_Summarize_LongSpan(t *testing.T) {
	f := newFake(t, func(_ int, r *request) reply { return good(t, r) })
	sum, _ := newSummarizer(t, f, openai.Config{MaxSpanBytes: 2000})
	in := input()
	in.Events = nil
	for i := 1; i <= 200; i++ {
		in.Events = append(in.Events, tier.Event{Seq: uint64(i), Turn: 1, Kind: tier.KindAssistant, Text: strings.Repeat("w", 50)})
	}
	in.To = 200
	if _, err := sum.Summarize(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	u := f.requests()[0].User
	if !strings.Contains(u, "[1 t1] assistant") || !strings.Contains(u, "[200 t1] assistant") || !strings.Contains(u, "entries left out") {
		t.Errorf("long span rendering:\n%s", u)
	}
	if strings.Contains(u, "[100 t1] assistant") || len(u) > 5000 {
		t.Errorf("the middle of the span was not left out (%d bytes)", len(u))
	}
}

// OnRetry hears of every failed attempt that is tried again, before its
// wait: the attempt, the failure (with its status) and the wait that Sleep
// is then given.
func TestSummarizer_Summarize_OnRetry(t *testing.T) {
	f := newFake(t, func(i int, r *request) reply {
		switch i {
		case 0:
			return reply{Status: 429, Header: map[string]string{"Retry-After": "2"}, Body: `{"error":{"message":"Rate limit reached"}}`}
		case 1:
			return reply{Status: 503, Body: "busy"}
		}
		return good(t, r)
	})
	var retries []openai.Retry
	sum, waits := newSummarizer(t, f, openai.Config{Retries: 3, BaseBackoff: 100 * time.Millisecond,
		OnRetry: func(r openai.Retry) { retries = append(retries, r) }})
	if _, err := sum.Summarize(context.Background(), input()); err != nil {
		t.Fatal(err)
	}
	w := waits.all()
	if len(retries) != 2 || len(w) != 2 {
		t.Fatalf("retries %+v, waits %v: want 2 of each", retries, w)
	}
	for i, r := range retries {
		var se *openai.StatusError
		want := []int{429, 503}[i]
		if r.Attempt != i+1 || r.Attempts != 4 || !errors.As(r.Err, &se) || se.StatusCode != want || r.Wait != w[i] {
			t.Errorf("retry %d: %+v, want attempt %d of 4 after %d, waiting %s", i, r, i+1, want, w[i])
		}
	}
	if !retries[0].RetryAfter || retries[0].Wait != 2*time.Second || retries[1].RetryAfter {
		t.Errorf("RetryAfter: %+v", retries)
	}
	if s := retries[0].String(); !strings.Contains(s, "attempt 1 of 4 failed") || !strings.Contains(s, "429 Too Many Requests") ||
		!strings.Contains(s, "retrying in 2s (the server's Retry-After)") {
		t.Errorf("String() = %q", s)
	}
}
