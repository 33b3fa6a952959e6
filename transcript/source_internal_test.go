package transcript

import (
	"errors"
	"strings"
	"testing"
)

// The newlines of a stream are remembered only as far back as a line can
// still be asked for: memory follows the record being read, not the file
// (a file of blank lines must not take memory per input byte), and lines
// stay exact.
func TestValueSource_ForgetsReadLines(t *testing.T) {
	const values, gap = 2000, 100
	var b strings.Builder
	for range values {
		b.WriteString(strings.Repeat("\n", gap))
		b.WriteString(`{"role":"user","content":"x"}`)
	}
	b.WriteString("\n{bad}\n")
	s := newValueSource(strings.NewReader(b.String()), "f.jsonl", 1<<20)
	held := 0
	for i := 0; ; i++ {
		_, line, err := s.next()
		held = max(held, len(s.c.nl))
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || !errors.Is(err, ErrBadJSON) || le.Line != values*gap+2 || i != values {
				t.Fatalf("after %d values: %v, want bad JSON on line %d after %d values", i, err, values*gap+2, values)
			}
			break
		}
		if want := (i+1)*gap + 1; line != want {
			t.Fatalf("value %d: line %d, want %d", i, line, want)
		}
	}
	if held > 16<<10 {
		t.Errorf("%d newline offsets held at once, for records %d lines apart", held, gap)
	}
}

// A Claude Code record without a type is counted under a name a reader
// can see: "unknown=(no_type):1", not "unknown=:1" — in the report, and in
// the error of a file that holds nothing else.
func TestClaudeCode_UntypedRecordNamed(t *testing.T) {
	_, rep, err := Read(ClaudeCode, strings.NewReader("{}\n{\"type\":\"\"}\n"), Options{})
	if !errors.Is(err, ErrNothingRecognized) || !strings.Contains(err.Error(), "records=2 unknown=(no_type):2") {
		t.Errorf("err = %v, want nothing recognized, naming the records", err)
	}
	if rep.Unknown["(no type)"] != 2 || !strings.Contains(rep.String(), "unknown=(no_type):2") {
		t.Errorf("report %q, unknown %v", rep.String(), rep.Unknown)
	}
}
