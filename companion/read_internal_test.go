package companion

import (
	"os"
	"path/filepath"
	"testing"
)

// OpenTranscriptFile reads up to the end of the last whole line, and to
// the end of a file whose last line, without its newline, completes a
// JSON value: a JSONL record, or a document over many lines (Gemini CLI's
// session-*.json chats end without a newline).
func TestOpenTranscriptFile_End(t *testing.T) {
	doc := "{\n  \"sessionId\": \"s\",\n  \"messages\": [\n    {\"id\": \"m1\"}\n  ]\n}"
	for _, c := range []struct {
		name, text string
		end        int
	}{
		{"JSONL ending with a newline", "{\"a\":1}\n{\"b\":2}\n", 16},
		{"JSONL whose last line has no newline", "{\"a\":1}\n{\"b\":2}", 15},
		{"JSONL whose last line is being written", "{\"a\":1}\n{\"b\":", 8},
		{"a document without a final newline", doc, len(doc)},
		{"a document with a final newline", doc + "\n", len(doc) + 1},
		{"a document being written", doc[:len(doc)-4], len("{\n  \"sessionId\": \"s\",\n  \"messages\": [\n    {\"id\": \"m1\"}\n")},
		{"one line being written", "{\"a\":", 0},
		{"empty", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.jsonl")
			if err := os.WriteFile(path, []byte(c.text), 0o600); err != nil {
				t.Fatal(err)
			}
			tf, err := OpenTranscriptFile(path)
			if err != nil {
				t.Fatal(err)
			}
			defer tf.Close()
			if tf.end != int64(c.end) {
				t.Errorf("%q: read up to %d, want %d", c.text, tf.end, c.end)
			}
		})
	}
}
