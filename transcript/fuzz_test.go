package transcript_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// fuzzRead reads data in format f with small limits and checks what must
// hold for any input: no panic; an error is a *LineError, never a broken
// invariant of this package; the events pass Event.Check and the ledger's
// rules in order; their number is bounded by the input's size.
func fuzzRead(t *testing.T, f transcript.Format, data []byte) {
	lim := tier.Limits{MaxEventBytes: 2048, MaxIDBytes: 64}
	sessions, _, err := transcript.Read(f, bytes.NewReader(data), transcript.Options{Limits: lim, MaxRecordBytes: 1 << 20})
	if err != nil {
		var le *transcript.LineError
		if !errors.As(err, &le) && !errors.Is(err, transcript.ErrNothingRecognized) || errors.HasAssertionFailure(err) {
			t.Fatalf("error is not a LineError about the input, nor nothing recognized: %v", err)
		}
	}
	n := 0
	for _, s := range sessions {
		n += len(s.Events)
		l := tier.NewLedger()
		for i := range s.Events {
			e := s.Events[i]
			if err := e.Check(lim); err != nil {
				t.Fatalf("session %q event %d %+v: %v", s.ID, i, e, err)
			}
			if e.Ref == "" {
				t.Fatalf("session %q event %d %+v: no ref", s.ID, i, e)
			}
			if err := l.Apply(&e); err != nil {
				t.Fatalf("session %q event %d %+v: the ledger refuses it: %v", s.ID, i, e, err)
			}
		}
	}
	if n > 4*len(data)+4 {
		t.Fatalf("%d events from %d bytes", n, len(data))
	}
}

// seed adds the fixtures under dir and a few hand-made inputs.
func seed(f *testing.F, dir string, extra ...string) {
	err := filepath.WalkDir(filepath.Join("testdata", dir), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f.Add(b)
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range extra {
		f.Add([]byte(s))
	}
}

func FuzzOpenAI(f *testing.F) {
	seed(f, "openai", `[]`, `{"messages":[]}`, `[{"role":"tool","tool_call_id":"x","content":null}]`,
		`{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"apply_patch","arguments":"{\"input\":\"+++ b/x\"}"}}]}`+"\n"+`{"role":"tool","tool_call_id":"a","content":"ok"}`)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, transcript.OpenAI, data) })
}

func FuzzAnthropic(f *testing.F) {
	seed(f, "anthropic", `[]`, `{"system":"s","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"q","is_error":true,"content":"The user doesn't want to proceed with this tool use."}]}]}`)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, transcript.Anthropic, data) })
}

func FuzzClaudeCode(f *testing.F) {
	seed(f, "claude-code", `{"type":"system","subtype":"compact_boundary","compactMetadata":{"trigger":"manual","preTokens":1}}`,
		`{"type":"user","isSidechain":true,"message":{"content":"x"}}`+"\n"+`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"Write","input":{"file_path":"a"}}]}}`)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, transcript.ClaudeCode, data) })
}

func FuzzCodex(f *testing.F) {
	seed(f, "codex", `{"type":"compacted","payload":{"message":"s"}}`,
		`{"type":"response_item","payload":{"type":"function_call","call_id":"c","name":"exec_command","arguments":"{}"}}`+"\n"+
			`{"type":"event_msg","payload":{"type":"exec_command_end","call_id":"c","exit_code":1}}`+"\n"+
			`{"type":"response_item","payload":{"type":"function_call_output","call_id":"c","output":"x"}}`)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, transcript.Codex, data) })
}

func FuzzGemini(f *testing.F) {
	seed(f, "gemini", `{"sessionId":"s","projectHash":"p","messages":[{"id":"u","type":"user","content":"hi"}]}`,
		`{"$set":{"messages":[{"id":"a","type":"user","content":[{"text":"x"}]}]}}`+"\n"+`{"$rewindTo":"a"}`,
		`{"id":"g","type":"gemini","content":"","toolCalls":[{"id":"c","name":"run_shell_command","args":{},"status":"success","result":"Output: x\nExit Code: 1"}]}`)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, transcript.Gemini, data) })
}
