package checkpoint

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// splitLinesSlow is the definition splitLines must keep: split at every rune
// of lineBreaks, "\r\n" counting as one.
func splitLinesSlow(s string) []string {
	var out []string
	for {
		i := strings.IndexAny(s, lineBreaks)
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		_, w := utf8.DecodeRuneInString(s[i:])
		if strings.HasPrefix(s[i:], "\r\n") {
			w = 2
		}
		s = s[i+w:]
	}
}

// FuzzSplitLines checks the byte-scanning splitLines against the rune
// definition, and quote against strconv.Quote, on any input, valid UTF-8 or
// not.
func FuzzSplitLines(f *testing.F) {
	for _, s := range []string{"", "a\nb", "a\r\nb\rc", "x\u0085y\u2028z\u2029", "\xc2", "\xe2\x80", "\xe2\x80\xa7\xe2\x80\xa8",
		"é\n€\r\n\v\f", "\xc2\x85\xc2\x84", "\r", "\r\r\n\n",
		"a \"quoted\" \\ path\x00\x7f\u00a0\u200b\U0001F600\xff\xfe tail", "\t\b\a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := splitLines(s), splitLinesSlow(s); !slices.Equal(got, want) {
			t.Fatalf("splitLines(%q) = %q, want %q", s, got, want)
		}
		if got, want := quote(s), strconv.Quote(s); got != want {
			t.Fatalf("quote(%q) = %s, want %s", s, got, want)
		}
		control := strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f || r >= 0x80 && r < 0xa0 })
		if got, want := oneLine(s) != s, control || strings.ContainsAny(s, lineBreaks); got != want {
			t.Fatalf("oneLine(%q) quoted %v, want %v", s, got, want)
		}
	})
}
