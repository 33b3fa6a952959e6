package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
)

// maxErrorBodyBytes caps what is read of an error answer, for its message.
const maxErrorBodyBytes = 64 << 10

// chatRequest is the body of POST /chat/completions.
type chatRequest struct {
	Model          string          `json:"model"`
	Messages       []chatMessage   `json:"messages"`
	ResponseFormat *responseFormat `json:"response_format,omitempty"`
	Temperature    *float64        `json:"temperature,omitempty"`
	MaxTokens      int             `json:"max_tokens,omitempty"`
	Stream         bool            `json:"stream"`
}

// chatMessage is one message of a chat request.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// responseFormat asks for JSON output.
type responseFormat struct {
	Type string `json:"type"`
}

// request returns the request for msgs, with or without JSON mode.
func (s *Summarizer) request(msgs []chatMessage, jsonMode bool) *chatRequest {
	r := &chatRequest{Model: s.cfg.Model, Messages: msgs, Temperature: s.cfg.Temperature, MaxTokens: s.cfg.MaxTokens}
	if jsonMode {
		r.ResponseFormat = &responseFormat{Type: "json_object"}
	}
	return r
}

// complete sends msgs once and returns the model's content. When JSON mode
// is on and the server refuses it with a 400 that names response_format (or
// json_object), JSON mode is switched off for good and the request is sent
// again at once, without it: the prompt asks for JSON anyway, and the
// answer is parsed the same way.
func (s *Summarizer) complete(ctx context.Context, msgs []chatMessage) (string, error) {
	jsonMode := !s.cfg.NoJSONMode && !s.noJSON.Load()
	content, err := s.post(ctx, s.request(msgs, jsonMode))
	var se *StatusError
	if jsonMode && errors.As(err, &se) && se.StatusCode == http.StatusBadRequest && rejectsJSONMode(se.Message) {
		s.noJSON.Store(true)
		return s.post(ctx, s.request(msgs, false))
	}
	return content, err
}

// rejectsJSONMode reports whether a 400's message is about the response
// format.
func rejectsJSONMode(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "response_format") || strings.Contains(m, "json_object") || strings.Contains(m, "response format")
}

// post sends one request, bounded by Config.Timeout, and returns the
// content of the first choice.
func (s *Summarizer) post(ctx context.Context, req *chatRequest) (string, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return "", errors.Wrap(err, "openai: encoding the request")
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return "", errors.Wrapf(err, "openai: POST %s", s.endpoint)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("User-Agent", "strata")
	if s.key != "" {
		hreq.Header.Set("Authorization", "Bearer "+s.key)
	}
	resp, err := s.cfg.HTTPClient.Do(hreq)
	if err != nil {
		return "", s.transportError(ctx, rctx, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
		se := &StatusError{URL: s.endpoint, StatusCode: resp.StatusCode, Status: resp.Status,
			RetryAfter: retryAfter(resp.Header, time.Now())}
		se.Message, se.Type, se.Code = errorMessage(data)
		return "", errors.WithStack(se)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxResponseBytes+1))
	if err != nil {
		return "", s.transportError(ctx, rctx, err)
	}
	if int64(len(data)) > s.cfg.MaxResponseBytes {
		return "", errors.WithStack(&OutputError{Reason: ReasonBadResponse,
			Detail: "the answer is over " + strconv.FormatInt(s.cfg.MaxResponseBytes, 10) + " bytes (Config.MaxResponseBytes)"})
	}
	return parseCompletion(data)
}

// transportError classifies a failed request: the caller's context done
// (returned as is, not retried), this request's timeout, or a connection
// failure.
func (s *Summarizer) transportError(ctx, rctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return errors.Wrapf(cerr, "openai: POST %s", s.endpoint)
	}
	if errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return errors.WithHint(errors.Newf("%w: POST %s: no complete answer within %s", ErrTimeout, s.endpoint, s.cfg.Timeout),
			"a large model on a slow machine may need a longer time limit per request")
	}
	return errors.Newf("%w: %v", ErrConnection, err)
}

// retryable reports whether another attempt may succeed after err.
func retryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Retryable()
	}
	return errors.Is(err, ErrTimeout) || errors.Is(err, ErrConnection) || errors.Is(err, ErrBadOutput)
}

// backoff returns the wait before retry n (1, 2, ...) after err: the
// server's Retry-After when it gave one, none after an unusable answer (the
// server is fine, the model is asked again), else BaseBackoff doubled per
// retry, capped at MaxBackoff, with equal jitter.
func (s *Summarizer) backoff(n int, err error) time.Duration {
	var se *StatusError
	if errors.As(err, &se) && se.RetryAfter > 0 {
		return min(se.RetryAfter, s.cfg.MaxBackoff)
	}
	if errors.Is(err, ErrBadOutput) {
		return 0
	}
	d := s.cfg.BaseBackoff
	for i := 1; i < n && d < s.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, s.cfg.MaxBackoff)
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// retryAfter returns the wait a 429 or 503 asks for: Retry-After-Ms
// (milliseconds, as some OpenAI-compatible servers send), else Retry-After
// in seconds or as an HTTP date; 0 when absent or unreadable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e9 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs > 0 && secs < 1e6 {
			return time.Duration(secs * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// errorMessage returns the message of an error body: error.message (with
// error.type and error.code) of an OpenAI-style body, a top-level "message"
// (vLLM) or "error" string (Ollama's native API), else the start of the
// body on one line.
func errorMessage(data []byte) (msg, typ, code string) {
	var b struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
	}
	if json.Unmarshal(data, &b) == nil {
		var e struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		}
		var str string
		switch {
		case len(b.Error) > 0 && json.Unmarshal(b.Error, &e) == nil && e.Message != "":
			code = strings.Trim(string(e.Code), `"`)
			if code == "null" {
				code = ""
			}
			return excerpt(e.Message, 500), e.Type, code
		case len(b.Error) > 0 && json.Unmarshal(b.Error, &str) == nil && str != "":
			return excerpt(str, 500), "", ""
		case b.Message != "":
			return excerpt(b.Message, 500), b.Type, ""
		}
	}
	return excerpt(string(data), 200), "", ""
}
