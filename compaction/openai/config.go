package openai

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
)

// Environment variables read for the API key when Config.APIKey and
// Config.APIKeyEnv are empty: the first one set and non-empty wins.
const (
	EnvAPIKey       = "STRATA_API_KEY"
	EnvOpenAIAPIKey = "OPENAI_API_KEY"
)

// Defaults of Config.
const (
	DefaultTimeout          = 2 * time.Minute
	DefaultBaseBackoff      = 500 * time.Millisecond
	DefaultMaxBackoff       = 30 * time.Second
	DefaultMaxResponseBytes = 4 << 20
	DefaultMaxSpanBytes     = 256 << 10
	// MaxRetries bounds Config.Retries.
	MaxRetries = 100
)

// Config says which server and model to ask, and how patiently. BaseURL and
// Model are required; every other field's zero value is a usable default.
type Config struct {
	// BaseURL is where the API lives, as the server documents it; the
	// request goes to BaseURL + "/chat/completions" (a trailing slash is
	// dropped, nothing else is added or removed). Examples:
	// https://api.openai.com/v1, http://localhost:11434/v1 (Ollama),
	// http://localhost:8000/v1 (vLLM), http://localhost:8080 or
	// http://localhost:8080/v1 (llama.cpp server). A URL that already ends
	// in /chat/completions is used as it is.
	BaseURL string
	// Model is the model name the server knows ("gpt-4o-mini",
	// "llama3.1:8b", ...).
	Model string
	// APIKey is sent as "Authorization: Bearer <key>". When empty it is read
	// from the environment variable APIKeyEnv names or, when that is empty
	// too, from STRATA_API_KEY, falling back to OPENAI_API_KEY. No key at
	// all is fine (local servers need none): no Authorization header is
	// sent.
	APIKey string
	// APIKeyEnv names the environment variable holding the key. When set,
	// the variable must be set and non-empty (else ErrNoAPIKey).
	APIKeyEnv string
	// Timeout bounds each request, from sending it to reading the whole
	// answer; a request that takes longer is cancelled and counts as a
	// retryable failure. 0 = DefaultTimeout (2 minutes).
	Timeout time.Duration
	// Retries is how many times a failed request is sent again: after a 408,
	// 429 or 5xx answer, a timeout, a connection error, or an answer that is
	// not a usable summary (see OutputError). 0 = one attempt only. A 401,
	// 400 or other 4xx is never retried.
	Retries int
	// BaseBackoff is the wait before the first retry; it doubles at each
	// further retry, up to MaxBackoff, and is jittered (the wait is between
	// half of it and all of it). 0 = DefaultBaseBackoff (500ms).
	BaseBackoff time.Duration
	// MaxBackoff caps the wait between attempts, also when the server asks
	// for a longer one with Retry-After. 0 = DefaultMaxBackoff (30s).
	MaxBackoff time.Duration
	// HTTPClient sends the requests; nil = a client of its own over
	// http.DefaultTransport. Its Timeout, if any, applies on top of Timeout.
	HTTPClient *http.Client
	// Temperature, when not nil, is sent as "temperature". nil = the
	// server's default (some models accept no other).
	Temperature *float64
	// MaxTokens, when positive, is sent as "max_tokens": the most tokens
	// the model may answer with. 0 = not sent (the server's default). An
	// answer cut at this limit is refused (ReasonTruncated).
	MaxTokens int
	// NoJSONMode leaves out response_format {"type":"json_object"}. Without
	// it the response format is asked for, and dropped for good (once) when
	// the server answers 400 with a message naming response_format or
	// json_object.
	NoJSONMode bool
	// MaxResponseBytes caps the bytes read of an answer; a larger answer is
	// refused. 0 = DefaultMaxResponseBytes (4 MiB).
	MaxResponseBytes int64
	// MaxSpanBytes caps the rendering of the raw span (or the children's
	// narratives) in the prompt; past it, events in the middle of the span
	// are left out and the prompt says how many. 0 = DefaultMaxSpanBytes
	// (256 KiB).
	MaxSpanBytes int
	// Sleep waits d between attempts, returning early with ctx's error when
	// ctx is done. nil = a timer. Tests set it to record the waits.
	Sleep func(ctx context.Context, d time.Duration) error
	// OnRetry, when not nil, is called after each failed attempt that will
	// be tried again, before the wait: what failed and how long the wait
	// is, so that a caller can show a person why nothing seems to happen
	// (the strata command prints it on stderr). It is called on the
	// goroutine of Summarize and must not block.
	OnRetry func(Retry)
}

// Retry is one failed attempt that Summarize tries again.
type Retry struct {
	Attempt  int           // the attempt that failed: 1, 2, ...
	Attempts int           // the attempts allowed in all: Config.Retries+1
	Err      error         // why it failed: a *StatusError, ErrTimeout, ErrConnection or an *OutputError
	Wait     time.Duration // the wait before the next attempt; 0 after an unusable answer
	// RetryAfter is true when Wait is the one the server asked for
	// (Retry-After or Retry-After-Ms), capped at Config.MaxBackoff.
	RetryAfter bool
}

// String returns the retry as a person reads it, e.g. "attempt 1 of 4
// failed: openai: server returned an error status: POST http://…: 429 Too
// Many Requests; retrying in 2s (the server's Retry-After)".
func (r Retry) String() string {
	s := fmt.Sprintf("attempt %d of %d failed: %v; ", r.Attempt, r.Attempts, r.Err)
	wait := r.Wait
	if wait > time.Millisecond {
		wait = wait.Round(time.Millisecond)
	}
	switch {
	case r.Wait <= 0:
		return s + "retrying at once"
	case r.RetryAfter:
		return s + fmt.Sprintf("retrying in %s (the server's Retry-After)", wait)
	default:
		return s + fmt.Sprintf("retrying in %s", wait)
	}
}

// withDefaults returns c with the zero values replaced by the defaults.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.BaseBackoff == 0 {
		c.BaseBackoff = DefaultBaseBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.MaxSpanBytes == 0 {
		c.MaxSpanBytes = DefaultMaxSpanBytes
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.Sleep == nil {
		c.Sleep = sleep
	}
	return c
}

// validate checks c (after withDefaults) and returns the endpoint URL.
func (c *Config) validate() (string, error) {
	bad := func(field, format string, args ...any) error {
		return errors.WithStack(&ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	base := strings.TrimSpace(c.BaseURL)
	if base == "" {
		return "", errors.WithHint(bad("BaseURL", "is required"),
			"e.g. https://api.openai.com/v1, or http://localhost:11434/v1 for Ollama")
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", bad("BaseURL", "%q is not a URL: %v", base, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", errors.WithHint(bad("BaseURL", "%q: scheme must be http or https", base),
			"e.g. http://localhost:11434/v1")
	}
	if u.Host == "" {
		return "", bad("BaseURL", "%q has no host", base)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", bad("BaseURL", "%q: a base URL takes no query or fragment", base)
	}
	if u.User != nil {
		return "", bad("BaseURL", "credentials in the URL are not supported: use APIKey")
	}
	if strings.TrimSpace(c.Model) == "" {
		return "", bad("Model", "is required")
	}
	if c.Model != strings.TrimSpace(c.Model) {
		return "", bad("Model", "%q has leading or trailing space", c.Model)
	}
	switch {
	case c.Timeout < 0:
		return "", bad("Timeout", "must not be negative, got %s", c.Timeout)
	case c.Retries < 0 || c.Retries > MaxRetries:
		return "", bad("Retries", "must be 0..%d, got %d", MaxRetries, c.Retries)
	case c.BaseBackoff < 0:
		return "", bad("BaseBackoff", "must not be negative, got %s", c.BaseBackoff)
	case c.MaxBackoff < 0:
		return "", bad("MaxBackoff", "must not be negative, got %s", c.MaxBackoff)
	case c.MaxTokens < 0:
		return "", bad("MaxTokens", "must not be negative, got %d", c.MaxTokens)
	case c.MaxResponseBytes < 0:
		return "", bad("MaxResponseBytes", "must not be negative, got %d", c.MaxResponseBytes)
	case c.MaxSpanBytes < 0:
		return "", bad("MaxSpanBytes", "must not be negative, got %d", c.MaxSpanBytes)
	case c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > 2):
		return "", bad("Temperature", "must be 0..2, got %g", *c.Temperature)
	}
	endpoint := strings.TrimRight(base, "/")
	if !strings.HasSuffix(endpoint, "/chat/completions") {
		endpoint += "/chat/completions"
	}
	return endpoint, nil
}

// apiKey returns the key to send: Config.APIKey, else the environment's.
func (c *Config) apiKey() (string, error) {
	if c.APIKey != "" {
		return c.APIKey, nil
	}
	if c.APIKeyEnv != "" {
		if k := strings.TrimSpace(os.Getenv(c.APIKeyEnv)); k != "" {
			return k, nil
		}
		return "", errors.WithHintf(errors.Wrapf(ErrNoAPIKey, "environment variable %s is unset or empty", c.APIKeyEnv),
			"export %s=<key>, or leave the key environment variable unnamed for a server that needs none", c.APIKeyEnv)
	}
	for _, name := range []string{EnvAPIKey, EnvOpenAIAPIKey} {
		if k := strings.TrimSpace(os.Getenv(name)); k != "" {
			return k, nil
		}
	}
	return "", nil
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
