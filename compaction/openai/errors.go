package openai

import (
	"fmt"
	"time"

	"github.com/cockroachdb/errors"
)

// Sentinel errors; compare with errors.Is. The typed errors below wrap them.
var (
	// ErrInvalidConfig is returned by New when a Config field is missing or
	// has a value it cannot use (wrapped in a *ConfigError naming the field).
	ErrInvalidConfig = errors.New("openai: invalid config")
	// ErrNoAPIKey is returned by New when Config.APIKeyEnv names an
	// environment variable that is unset or empty.
	ErrNoAPIKey = errors.New("openai: no API key")
	// ErrHTTPStatus is returned (wrapped in a *StatusError) when the server
	// answers with a status other than 200.
	ErrHTTPStatus = errors.New("openai: server returned an error status")
	// ErrTimeout is returned when one request takes longer than
	// Config.Timeout.
	ErrTimeout = errors.New("openai: request timed out")
	// ErrConnection is returned when a request fails before the server
	// answers: connection refused or reset, DNS, TLS, a body cut short.
	ErrConnection = errors.New("openai: connection failed")
	// ErrBadOutput is returned (wrapped in an *OutputError saying why) when
	// the server's answer cannot be used as a summary.
	ErrBadOutput = errors.New("openai: unusable model output")
	// ErrGaveUp is returned (wrapped in a *GiveUpError with the last
	// failure) when every attempt failed with a retryable error.
	ErrGaveUp = errors.New("openai: gave up")
)

// ConfigError is a Config field New cannot use. errors.Is(err,
// ErrInvalidConfig) holds for it.
type ConfigError struct {
	Field  string // the Config field: "BaseURL", "Model", ...
	Reason string // what is wrong with it
}

// Error implements error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s: Config.%s: %s", ErrInvalidConfig, e.Field, e.Reason)
}

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// Format implements fmt.Formatter through errors.FormatError.
func (e *ConfigError) Format(s fmt.State, verb rune) { errors.FormatError(e, s, verb) }

// StatusError is an answer with an HTTP status other than 200: the status
// and what the server said. 429 and 5xx are retried; other statuses are not.
// errors.Is(err, ErrHTTPStatus) holds for it.
type StatusError struct {
	URL        string // the endpoint
	StatusCode int    // 401, 429, 500, ...
	Status     string // "401 Unauthorized"
	// Message is the server's error message: error.message of an
	// OpenAI-style error body, else the start of the body on one line.
	Message string
	// Type and Code are error.type and error.code of an OpenAI-style body,
	// where given.
	Type, Code string
	// RetryAfter is the wait the server asked for (Retry-After or
	// Retry-After-Ms); 0 when it did not.
	RetryAfter time.Duration
}

// Error implements error.
func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s: POST %s: %s", ErrHTTPStatus, e.URL, e.Status)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Unwrap returns ErrHTTPStatus.
func (e *StatusError) Unwrap() error { return ErrHTTPStatus }

// Format implements fmt.Formatter through errors.FormatError.
func (e *StatusError) Format(s fmt.State, verb rune) { errors.FormatError(e, s, verb) }

// Retryable reports whether the status is worth another attempt: 408, 429
// and 5xx.
func (e *StatusError) Retryable() bool {
	return e.StatusCode == 408 || e.StatusCode == 429 || e.StatusCode >= 500
}

// OutputReason says why an answer is not a usable summary.
type OutputReason string

// Reasons of an *OutputError.
const (
	// ReasonBadResponse: the response body is not a chat completion (not
	// JSON, an HTML page, an "error" object with status 200, too large).
	ReasonBadResponse OutputReason = "bad_response"
	// ReasonNoChoices: the completion has no choices.
	ReasonNoChoices OutputReason = "no_choices"
	// ReasonTruncated: the model stopped at its token limit
	// (finish_reason "length"), so its answer is cut short.
	ReasonTruncated OutputReason = "truncated"
	// ReasonFiltered: the server's content filter stopped the answer
	// (finish_reason "content_filter").
	ReasonFiltered OutputReason = "filtered"
	// ReasonEmpty: the message has no content.
	ReasonEmpty OutputReason = "empty"
	// ReasonInvalidJSON: no JSON object could be read from the content
	// (also when it is cut short).
	ReasonInvalidJSON OutputReason = "invalid_json"
	// ReasonNoNarrative: the object has no "narrative", or it is blank.
	ReasonNoNarrative OutputReason = "no_narrative"
	// ReasonWrongType: a field has the wrong JSON type or an unknown kind
	// or state.
	ReasonWrongType OutputReason = "wrong_type"
	// ReasonOverBudget: the narrative is over the node's token budget.
	ReasonOverBudget OutputReason = "over_budget"
)

// OutputError is an answer that cannot be used as a summary: never trusted,
// never stored. errors.Is(err, ErrBadOutput) holds for it.
type OutputError struct {
	Reason OutputReason
	Detail string // what exactly is wrong: the field, the parse error, the sizes
	// Excerpt is the start of the model's content (or of the body), on one
	// line, for the person reading the error.
	Excerpt string
}

// Error implements error.
func (e *OutputError) Error() string {
	s := fmt.Sprintf("%s: %s", ErrBadOutput, e.Reason)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Excerpt != "" {
		s += fmt.Sprintf(" (output began %q)", e.Excerpt)
	}
	return s
}

// Unwrap returns ErrBadOutput.
func (e *OutputError) Unwrap() error { return ErrBadOutput }

// Format implements fmt.Formatter through errors.FormatError.
func (e *OutputError) Format(s fmt.State, verb rune) { errors.FormatError(e, s, verb) }

// GiveUpError is returned when every attempt failed with a retryable error
// (Config.Retries + 1 of them). errors.Is(err, ErrGaveUp) holds for it, and
// errors.Is and errors.As also find the last failure (Last).
type GiveUpError struct {
	URL      string // the endpoint
	Attempts int    // requests made
	Last     error
}

// Error implements error.
func (e *GiveUpError) Error() string {
	unit := "attempts"
	if e.Attempts == 1 {
		unit = "attempt"
	}
	return fmt.Sprintf("%s after %d %s: last: %v", ErrGaveUp, e.Attempts, unit, e.Last)
}

// Unwrap returns the last failure.
func (e *GiveUpError) Unwrap() error { return e.Last }

// Is reports whether target is ErrGaveUp.
func (e *GiveUpError) Is(target error) bool { return target == ErrGaveUp }

// Format implements fmt.Formatter through errors.FormatError.
func (e *GiveUpError) Format(s fmt.State, verb rune) { errors.FormatError(e, s, verb) }

// excerpt returns the start of s on one line, at most n bytes.
func excerpt(s string, n int) string { return oneLine(s, n) }
