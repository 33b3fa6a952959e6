package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-go/strata/compaction/openai"
	"github.com/strata-go/strata/tier"
)

// request is one request the fake server received.
type request struct {
	Path   string
	Method string
	Header http.Header
	Body   map[string]any
	System string // the system message
	User   string // the user messages, joined
}

// reply is what the fake server answers.
type reply struct {
	Status int               // 0 = 200
	Header map[string]string // extra headers
	Body   string
	// Hang, when positive, waits this long (or until the client gives up)
	// before answering.
	Hang time.Duration
}

// fakeServer is an OpenAI-compatible chat-completions server whose answers
// a test scripts: answer gets the request's index (from 0) and the request.
type fakeServer struct {
	*httptest.Server
	t      testing.TB
	mu     sync.Mutex
	reqs   []request
	answer func(i int, r *request) reply
}

func newFake(t testing.TB, answer func(i int, r *request) reply) *fakeServer {
	t.Helper()
	f := &fakeServer{t: t, answer: answer}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	rec := request{Path: r.URL.Path, Method: r.Method, Header: r.Header.Clone()}
	if err := json.Unmarshal(data, &rec.Body); err != nil {
		f.t.Errorf("fake server: request body is not JSON: %v", err)
	}
	msgs, _ := rec.Body["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		content, _ := mm["content"].(string)
		switch mm["role"] {
		case "system":
			rec.System += content
		case "user":
			rec.User += content + "\n"
		}
	}
	f.mu.Lock()
	i := len(f.reqs)
	f.reqs = append(f.reqs, rec)
	f.mu.Unlock()
	rep := f.answer(i, &rec)
	if rep.Hang > 0 {
		select {
		case <-time.After(rep.Hang):
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	if rep.Status == 0 {
		rep.Status = 200
	}
	w.WriteHeader(rep.Status)
	io.WriteString(w, rep.Body)
}

// requests returns the requests received so far.
func (f *fakeServer) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.reqs...)
}

// completion returns a chat-completion body whose one choice says content.
func completion(content, finish string) string {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "model": "test-model",
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish,
			"message": map[string]any{"role": "assistant", "content": content}}},
	})
	return string(b)
}

// summaryJSON returns the answer a model gives: the object the prompt asks
// for.
func summaryJSON(narrative string, c tier.Claims) string {
	b, err := json.Marshal(map[string]any{"narrative": narrative, "claims": c})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// requiredClaims reads the required claims from a prompt, as a model that
// follows it copies them.
func requiredClaims(t testing.TB, user string) tier.Claims {
	t.Helper()
	const head = "to copy into \"claims\" exactly:\n```json\n"
	i := strings.Index(user, head)
	if i < 0 {
		t.Fatalf("the prompt has no required claims block:\n%s", user)
	}
	rest := user[i+len(head):]
	j := strings.Index(rest, "\n```")
	if j < 0 {
		t.Fatalf("the required claims block is not closed:\n%s", user)
	}
	var c tier.Claims
	if err := json.Unmarshal([]byte(rest[:j]), &c); err != nil {
		t.Fatalf("required claims in the prompt: %v\n%s", err, rest[:j])
	}
	return c
}

// spanOf reads "seq A..B" from a prompt.
func spanOf(user string) string {
	var from, to uint64
	for _, l := range strings.Split(user, "\n") {
		if i := strings.Index(l, "seq "); i >= 0 && strings.HasPrefix(l, "Make an") {
			fmt.Sscanf(l[i:], "seq %d..%d", &from, &to)
			break
		}
	}
	return fmt.Sprintf("%d..%d", from, to)
}

// faithful answers every request with the required claims and a narrative
// naming the span.
func faithful(t testing.TB) func(int, *request) reply {
	return func(_ int, r *request) reply {
		return reply{Body: completion(summaryJSON("the agent worked on seq "+spanOf(r.User)+".", requiredClaims(t, r.User)), "stop")}
	}
}

// sleeps records the waits between attempts without waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// newSummarizer returns a Summarizer for the fake server's /v1 with a
// recorded sleep, and fails t on a config error.
func newSummarizer(t testing.TB, f *fakeServer, cfg openai.Config) (*openai.Summarizer, *sleeps) {
	t.Helper()
	s := &sleeps{}
	if cfg.BaseURL == "" {
		cfg.BaseURL = f.URL + "/v1"
	}
	if cfg.Model == "" {
		cfg.Model = "test-model"
	}
	if cfg.Sleep == nil {
		cfg.Sleep = s.sleep
	}
	sum, err := openai.New(cfg)
	if err != nil {
		t.Fatalf("openai.New: %v", err)
	}
	return sum, s
}

// incidentEvents returns the events of the seed's incident fixture.
func incidentEvents(t testing.TB) (string, []tier.Event) {
	t.Helper()
	f, err := os.Open("../../testdata/incident/migration.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd := tier.NewReader(f, "migration.jsonl", tier.Limits{})
	session := ""
	var out []tier.Event
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Session != "" {
			session = rec.Session
		}
		out = append(out, rec.Event)
	}
	return session, out
}
