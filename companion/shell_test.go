package companion_test

import (
	"slices"
	"testing"

	"github.com/strata-go/strata/companion"
)

func TestShellWords(t *testing.T) {
	env := func(name string) string {
		return map[string]string{"HOME": "/home/me", "CLAUDE_PROJECT_DIR": "/p/my app", "DB": "/srv/a b.db"}[name]
	}
	for _, tc := range []struct {
		line string
		want []string // nil: not one simple command
	}{
		{`strata claude-code hook --db "$CLAUDE_PROJECT_DIR"/.claude/strata.db`, []string{"strata", "claude-code", "hook", "--db", "/p/my app/.claude/strata.db"}},
		{`strata claude-code hook --db '/srv/it''s.db'`, []string{"strata", "claude-code", "hook", "--db", "/srv/its.db"}},
		{`'/opt/my tools/strata' claude-code hook --db ${HOME}/s.db`, []string{"/opt/my tools/strata", "claude-code", "hook", "--db", "/home/me/s.db"}},
		{`strata claude-code hook --db a\ b.db`, []string{"strata", "claude-code", "hook", "--db", "a b.db"}},
		// As sh reads them, where a splitter by hand does not:
		{`strata claude-code hook --db ~/.claude/strata.db`, []string{"strata", "claude-code", "hook", "--db", "/home/me/.claude/strata.db"}},
		{`strata claude-code hook --db "~/x.db"`, []string{"strata", "claude-code", "hook", "--db", "~/x.db"}},
		{`strata claude-code hook --db $DB`, []string{"strata", "claude-code", "hook", "--db", "/srv/a", "b.db"}},
		{`strata claude-code hook --db "$DB"`, []string{"strata", "claude-code", "hook", "--db", "/srv/a b.db"}},
		{`strata claude-code hook --db s.db # --db other.db`, []string{"strata", "claude-code", "hook", "--db", "s.db"}},
		{`strata claude-code hook --db s#1.db`, []string{"strata", "claude-code", "hook", "--db", "s#1.db"}},
		{`strata claude-code hook | tee log`, nil},
		{`strata claude-code hook; rm -rf /`, nil},
		{`strata claude-code hook > log`, nil},
		{`DB=x strata claude-code hook`, nil},
		{`strata claude-code hook --db $(cat db)`, nil},
		{`strata claude-code hook --db "unclosed`, nil},
	} {
		got, ok := companion.ShellWords(tc.line, env)
		if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("ShellWords(%q) = %q, %v; want %q", tc.line, got, ok, tc.want)
		}
	}
	// Without env, variables stay as written.
	if got, ok := companion.ShellWords(`strata claude-code hook --db "$CLAUDE_PROJECT_DIR"/s.db`, nil); !ok || got[4] != "$CLAUDE_PROJECT_DIR/s.db" {
		t.Errorf("without env: %q %v", got, ok)
	}
}
