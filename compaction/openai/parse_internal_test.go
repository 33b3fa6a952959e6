package openai

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		h    map[string]string
		want time.Duration
	}{
		{nil, 0},
		{map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond},
		{map[string]string{"Retry-After": "-3"}, 0},
		{map[string]string{"Retry-After": "soon"}, 0},
		{map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second},
		{map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0},
		{map[string]string{"Retry-After": "7", "Retry-After-Ms": "250"}, 250 * time.Millisecond},
	} {
		h := http.Header{}
		for k, v := range tc.h {
			h.Set(k, v)
		}
		if got := retryAfter(h, now); got != tc.want {
			t.Errorf("retryAfter(%v) = %s, want %s", tc.h, got, tc.want)
		}
	}
}

func TestExtractObject(t *testing.T) {
	for _, tc := range []struct {
		content   string
		narrative string // "" = error expected
		wantErr   string
	}{
		{`{"narrative":"a"}`, `"a"`, ""},
		{"  \n{\"narrative\":\"a\"}\n", `"a"`, ""},
		{"```json\n{\"narrative\":\"b\"}\n```", `"b"`, ""},
		{"```\n{\"narrative\":\"c\"}\n```", `"c"`, ""},
		{"Sure, here it is: {\"narrative\":\"d\", \"claims\":{}} Hope this helps {!}", `"d"`, ""},
		{"<think>maybe {\"x\":1}</think>{\"narrative\":\"e\"}", `"e"`, ""},
		{`{"narrative":"f","claims":{"unresolved":[{"id":"c1"`, "", "cut short"},
		{`no json here`, "", "no '{'"},
		{`{"narrative": tru}`, "", "invalid character"},
	} {
		m, err := extractObject(tc.content)
		if tc.narrative == "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("extractObject(%q): %v, %v; want an error with %q", tc.content, m, err, tc.wantErr)
			}
			continue
		}
		if err != nil || string(m["narrative"]) != tc.narrative {
			t.Errorf("extractObject(%q) = %s, %v; want narrative %s", tc.content, m["narrative"], err, tc.narrative)
		}
	}
	// An object without a narrative is returned when it is the answer:
	// the caller says what it lacks.
	m, err := extractObject(`{"summary":"x"}`)
	if err != nil || string(m["summary"]) != `"x"` {
		t.Errorf("extractObject without narrative: %v, %v", m, err)
	}
}
