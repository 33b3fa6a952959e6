package companion

import (
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// ShellWords reads a hook's command line as sh reads it, into the words
// of the one simple command it runs: quotes, escapes, a "#" comment, "~"
// and "~/…" (as env's HOME), $NAME and ${NAME} (env's; an unquoted one
// holding a blank is split into words, as sh splits it). With env nil a
// variable is kept as "$NAME", and "~/" stands for "$HOME/". ok is
// false for a line that is not one simple command with words only — a
// pipe, a list, a redirection, an assignment, a command substitution —
// or that sh would not parse. The line is read, never run: nothing is
// globbed.
func ShellWords(s string, env func(string) string) (words []string, ok bool) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(s), "")
	if err != nil || len(f.Stmts) != 1 {
		return nil, false
	}
	st := f.Stmts[0]
	call, isCall := st.Cmd.(*syntax.CallExpr)
	if !isCall || st.Negated || st.Background || st.Coprocess || len(st.Redirs) > 0 || len(call.Assigns) > 0 {
		return nil, false
	}
	lookup := env
	if lookup == nil {
		lookup = func(name string) string { return "$" + name }
	}
	cfg := &expand.Config{Env: expand.FuncEnviron(func(name string) string {
		if name == "IFS" {
			return "" // unset: sh's blanks split the words
		}
		return lookup(name)
	})}
	words, err = expand.Fields(cfg, call.Args...)
	if err != nil {
		return nil, false
	}
	return words, true
}
