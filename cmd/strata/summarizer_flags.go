package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/spf13/pflag"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/compaction/openai"
)

// summarizerFlags are the flags that choose the summarizer and how it is
// asked, which replay and compact share.
type summarizerFlags struct {
	summarizer string
	drop       string
	retries    int
	repair     bool

	// --summarizer openai: the model, its endpoint and how patiently to
	// ask it. llmSet says whether any of these flags was given.
	model, baseURL, apiKeyEnv string
	llmTimeout                time.Duration
	llmRetries                int
	llmSet                    bool
	dropSet                   bool // --drop was given

	sum compaction.Summarizer // set by validate

	// Set by the command's run: its name, the progress line and stderr,
	// where a model's retries are reported.
	command string
	prog    *progress
	errOut  io.Writer
}

// add defines --summarizer, --model, --base-url, --api-key-env,
// --llm-timeout, --llm-retries, --drop, --retries and --repair on f.
func (o *summarizerFlags) add(f *pflag.FlagSet) {
	f.StringVar(&o.summarizer, "summarizer", "extractive", "the summarizer: extractive (carries every required claim), lossy (drops --drop), or openai (a model: --model, --base-url)")
	f.StringVar(&o.model, "model", "", "--summarizer openai: the model name, e.g. gpt-4o-mini or llama3.1:8b")
	f.StringVar(&o.baseURL, "base-url", "", "--summarizer openai: the API base URL, e.g. https://api.openai.com/v1 or http://localhost:11434/v1")
	f.StringVar(&o.apiKeyEnv, "api-key-env", "", "--summarizer openai: the environment variable holding the API key (default "+openai.EnvAPIKey+", then "+openai.EnvOpenAIAPIKey+")")
	f.DurationVar(&o.llmTimeout, "llm-timeout", openai.DefaultTimeout, "--summarizer openai: the time limit of each request")
	f.IntVar(&o.llmRetries, "llm-retries", 3, "--summarizer openai: send a request again up to N times after a 429, 5xx, timeout, connection error or unusable answer")
	f.StringVar(&o.drop, "drop", compaction.DropNegatives+","+compaction.DropArtifacts,
		"claim classes the lossy summarizer drops: a comma list of "+strings.Join(compaction.DropClasses, ", "))
	f.IntVar(&o.retries, "retries", 0, "ask the summarizer again, told what was missing, up to R times after a refusal")
	f.BoolVar(&o.repair, "repair", false, "after the last refused retry, commit the summarizer's narrative with the claims computed from the raw span (the refusal stays in the audit)")
}

// changed records which of the flags f holds were given.
func (o *summarizerFlags) changed(f *pflag.FlagSet) {
	for _, name := range []string{"model", "base-url", "api-key-env", "llm-timeout", "llm-retries"} {
		o.llmSet = o.llmSet || f.Changed(name)
	}
	o.dropSet = f.Changed("drop")
}

// validate checks the flags and builds the summarizer; its errors are bad
// usage.
func (o *summarizerFlags) validate() error {
	if o.retries < 0 {
		return usagef("--retries must be 0 or more, got %d", o.retries)
	}
	drop := strings.Split(o.drop, ",")
	if _, err := compaction.NewLossy(drop...); err != nil { // checks the list whatever the summarizer
		return &usageError{err: errors.Wrap(err, "--drop")}
	}
	if o.dropSet && o.summarizer != "lossy" {
		return usagef("--drop applies only to --summarizer lossy")
	}
	if o.summarizer == "openai" {
		return o.validateOpenAI()
	}
	if o.llmSet {
		return usagef("--model, --base-url, --api-key-env, --llm-timeout and --llm-retries apply only to --summarizer openai")
	}
	sum, err := compaction.New(o.summarizer, drop)
	if err != nil {
		return &usageError{err: errors.Wrap(err, "--summarizer")}
	}
	o.sum = sum
	return nil
}

// validateOpenAI checks the --summarizer openai flags and builds the
// summarizer: a missing --model or --base-url, a bad value or a key
// variable that is unset is bad usage.
func (o *summarizerFlags) validateOpenAI() error {
	if o.model == "" || o.baseURL == "" {
		return &usageError{err: errors.WithHint(errors.New("--summarizer openai needs --model and --base-url"),
			"e.g. --model llama3.1:8b --base-url http://localhost:11434/v1 (Ollama)")}
	}
	if o.llmTimeout <= 0 {
		return usagef("--llm-timeout must be positive, got %s", o.llmTimeout)
	}
	if o.llmRetries < 0 || o.llmRetries > openai.MaxRetries {
		return usagef("--llm-retries must be 0..%d, got %d", openai.MaxRetries, o.llmRetries)
	}
	sum, err := openai.New(openai.Config{BaseURL: o.baseURL, Model: o.model, APIKeyEnv: o.apiKeyEnv,
		Timeout: o.llmTimeout, Retries: o.llmRetries, OnRetry: o.reportRetry})
	if err != nil {
		return &usageError{err: errors.Wrap(err, "--summarizer openai")}
	}
	o.sum = sum
	return nil
}

// reportRetry says on stderr that the model is asked again, why, and after
// what wait: a 429 with Retry-After or a model that hangs until
// --llm-timeout would otherwise stall the command without a word.
func (o *summarizerFlags) reportRetry(r openai.Retry) {
	if o.errOut == nil {
		return
	}
	o.prog.above(func() { fmt.Fprintf(o.errOut, "%s: model %s: %s\n", o.command, o.model, r) })
}

// options returns the compactor's options: the summarizer, with policy.
func (o *summarizerFlags) options(policy compaction.Policy) compaction.Options {
	return compaction.Options{Summarizer: o.sum, Policy: policy, Retries: o.retries, Repair: o.repair}
}
