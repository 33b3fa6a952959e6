package openai

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/compaction"
)

// Summarizer is a compaction.Summarizer that asks a model behind an
// OpenAI-compatible chat-completions endpoint. It is safe for concurrent
// use.
type Summarizer struct {
	cfg      Config
	endpoint string
	key      string
	// noJSON is set once the server has refused response_format.
	noJSON atomic.Bool
}

var _ compaction.Summarizer = (*Summarizer)(nil)

// New returns a Summarizer for cfg, or a *ConfigError naming the field New
// cannot use (errors.Is(err, ErrInvalidConfig)), or ErrNoAPIKey when
// cfg.APIKeyEnv names an unset variable. It sends nothing.
func New(cfg Config) (*Summarizer, error) {
	cfg = cfg.withDefaults()
	endpoint, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	key, err := cfg.apiKey()
	if err != nil {
		return nil, err
	}
	return &Summarizer{cfg: cfg, endpoint: endpoint, key: key}, nil
}

// Name returns "openai:" and the model, recorded on every node it makes.
func (s *Summarizer) Name() string { return "openai:" + s.cfg.Model }

// Endpoint returns the URL requests are sent to.
func (s *Summarizer) Endpoint() string { return s.endpoint }

// Summarize implements compaction.Summarizer: it sends the span, budget
// and required claims (and on a compactor's retry, what the last summary
// lacked) and reads the answer as {"narrative", "claims"}.
//
// A 408, 429 or 5xx answer, a timeout, a connection error or an unusable
// answer is tried again, up to Config.Retries times: after a backoff (the
// server's Retry-After when given), or at once, told what was wrong, after
// an unusable answer. When every attempt fails the error is a *GiveUpError
// holding the last failure; another 4xx is returned at once as a
// *StatusError. The caller's context ends it at any point with ctx's error.
//
// The claims returned are only checked for shape: the store validates them
// against the raw span when the compactor commits.
func (s *Summarizer) Summarize(ctx context.Context, in *compaction.Input) (compaction.Output, error) {
	base := messages(in, s.cfg.MaxSpanBytes)
	msgs := base
	var last error
	attempts := 0
	for try := 0; try <= s.cfg.Retries; try++ {
		if try > 0 {
			wait := s.backoff(try, last)
			if s.cfg.OnRetry != nil {
				var se *StatusError
				s.cfg.OnRetry(Retry{Attempt: attempts, Attempts: s.cfg.Retries + 1, Err: last, Wait: wait,
					RetryAfter: errors.As(last, &se) && se.RetryAfter > 0})
			}
			if err := s.cfg.Sleep(ctx, wait); err != nil {
				return compaction.Output{}, errors.Wrapf(err, "openai: waiting to retry after %d attempts (last: %v)", attempts, last)
			}
		}
		if err := ctx.Err(); err != nil {
			return compaction.Output{}, errors.Wrapf(err, "openai: POST %s", s.endpoint)
		}
		attempts++
		content, err := s.complete(ctx, msgs)
		if err == nil {
			var out compaction.Output
			if out, err = parseSummary(content, in); err == nil {
				return out, nil
			}
		}
		if errors.Is(err, ErrBadOutput) {
			// Ask again from the same prompt, told what was wrong.
			msgs = append(slices.Clip(base), retryNote(err))
		}
		if ctx.Err() != nil || !retryable(err) {
			return compaction.Output{}, s.fail(err)
		}
		last = err
	}
	return compaction.Output{}, s.fail(errors.WithStack(&GiveUpError{URL: s.endpoint, Attempts: attempts, Last: last}))
}

// fail returns the error Summarize ends with: an answer that could not be
// used (an *OutputError, the last of the attempts) is marked
// compaction.ErrUnusableOutput, so that the Compactor records a refused
// compaction saying why; anything else (the server, the network, the
// context) is returned as it is, with a hint.
func (s *Summarizer) fail(err error) error {
	err = s.hint(err)
	var oe *OutputError
	if errors.As(err, &oe) {
		return compaction.UnusableOutput(string(oe.Reason), err)
	}
	return err
}

// hint adds what to do about the common failures.
func (s *Summarizer) hint(err error) error {
	var se *StatusError
	if !errors.As(err, &se) {
		if errors.Is(err, ErrConnection) {
			return errors.WithHintf(err, "is the server running at %s?", s.cfg.BaseURL)
		}
		return err
	}
	switch se.StatusCode {
	case 401, 403:
		if s.key == "" {
			return errors.WithHintf(err, "no API key was sent: set %s or %s (or name the variable with --api-key-env)", EnvAPIKey, EnvOpenAIAPIKey)
		}
		return errors.WithHint(err, "the server refused the API key")
	case 404:
		return errors.WithHintf(err, "check the base URL (requests go to %s) and the model name %q", s.endpoint, s.cfg.Model)
	case 429:
		return errors.WithHint(err, "rate limited: allow more retries, or compact less often")
	}
	return err
}
