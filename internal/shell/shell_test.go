package shell_test

import (
	"testing"

	"github.com/strata-go/strata/internal/shell"
)

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":                                 "''",
		"/p/.claude/strata.db":             "/p/.claude/strata.db",
		"my db":                            "'my db'",
		"it's":                             `'it'\''s'`,
		"postgres://u@h/d?sslmode=disable": "'postgres://u@h/d?sslmode=disable'",
	} {
		if got := shell.Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}
