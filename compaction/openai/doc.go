// Package openai is a compaction.Summarizer backed by a model behind any
// OpenAI-compatible chat-completions endpoint: OpenAI, Ollama (/v1), vLLM,
// the llama.cpp server, and the like.
//
// Each summary is one POST {BaseURL}/chat/completions. The prompt hands the
// model the span — its raw events rendered one per line, or for depth ≥ 2
// the children's narratives — the token budget, and the required claims as
// JSON (the claims the store will demand, tier.Required), and asks for one
// JSON object:
//
//	{"narrative": "...", "claims": {"resolved": [...], "unresolved": [...],
//	 "failures": [...], "dispositions": [...], "constraints": [...], "artifacts": [...]}}
//
// mirroring tier.Claims, with kinds and states by name ("tool_call",
// "rejected"). On a compactor retry (Input.Missing), the prompt says what
// the refused summary lacked. The request asks for
// response_format {"type":"json_object"}; a server that answers 400 naming
// response_format or json_object is asked again without it, and never with
// it again.
//
// The answer is read strictly: a JSON object is taken from the whole
// content, a ``` fence, or after leading prose; invalid or truncated JSON, a
// missing or blank narrative, fields of the wrong type, unknown kinds or
// states, no choices, finish_reason "length", or a narrative over the
// budget (tier.EstimateTokens) are an *OutputError with its Reason — never a
// summary. Whether the claims are the right ones is not judged here: the
// store validates every summary against the raw span when it commits, and
// refuses one whose model dropped or invented a claim.
//
// Transport: each request is bounded by Config.Timeout; a 408, 429 or 5xx
// answer, a timeout, a connection error or an unusable answer is tried
// again up to Config.Retries times, with exponential backoff and jitter (the
// server's Retry-After when it sends one, capped at Config.MaxBackoff);
// other 4xx answers (401, 400, 404) fail at once with a *StatusError naming
// the status and the server's message. Answers are read through a size cap.
//
// The API key is Config.APIKey, else the variable Config.APIKeyEnv names,
// else STRATA_API_KEY, else OPENAI_API_KEY; with none, no Authorization
// header is sent (local servers need none).
//
// # Caveats
//
// An answer that is not a usable summary (an *OutputError: not JSON, no
// narrative, over the budget, cut short …), still so after the retries, is
// marked compaction.ErrUnusableOutput: the Compactor records it as a
// refused compaction of class "output", with an audit record saying why,
// and the agent resumes from the raw checkpoint as after any refusal. Any
// other error (a 401 or 400, the server unreachable after the retries, the
// context ending) is a failure of the compaction run, not a refusal: Run
// returns it (errors.As finds the *StatusError or *GiveUpError), nothing is
// written — no node, marker, checkpoint or audit record — and the same span
// is planned again on the next Run.
//
// Config.OnRetry hears of each retry before its wait, so that a caller can
// show why nothing seems to happen: the strata command prints each one on
// stderr.
//
// The prompt caps the span it shows (Config.MaxSpanBytes, each event's text
// cut to a few hundred bytes): a model summarizing a very long span sees its
// start and end, and the required claims for all of it. 256 KiB is more than
// many local models' context window: Ollama, for one, silently drops the
// start of a prompt longer than its context length (OLLAMA_CONTEXT_LENGTH,
// or the model's num_ctx) — the instructions with it. Compact often enough
// (compaction.Policy.EveryTokens, 500 by default, bounds a span to about
// that size plus its last event) or lower MaxSpanBytes to fit the model.
package openai
