package claudecode_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/companion/claudecode"
)

// settingsWithStrata are settings texts holding strata's handlers in every
// way uninstall meets them: a group of its own, beside another handler,
// two in one group, a group with another member, under events in any
// order, over mixed line ends.
var settingsWithStrata = map[string]string{
	"groups of their own": `{"hooks":{"PreCompact":[{"hooks":[{"type":"command","command":"strata claude-code hook"}]}],"SessionStart":[{"matcher":"compact","hooks":[{"type":"command","command":"strata claude-code hook"}]}]}}`,
	"beside others":       "{\n  \"hooks\": {\n    \"SessionStart\": [\n      {\"matcher\": \"compact\", \"hooks\": [{\"command\": \"date\"}, {\"command\": \"strata claude-code hook --db a.db\"}]},\n      {\"hooks\": [{\"command\": \"strata claude-code hook\"}], \"note\": 1}\n    ],\n    \"PreCompact\": [\n      {\"hooks\": [{\"command\": \"/usr/local/bin/strata claude-code hook\"}, {\"command\": \"strata claude-code hook --db b.db\"}]}\n    ]\n  },\n  \"model\": \"opus\"\n}\n",
	"first of several":    "{\n  \"hooks\": {\n    \"PreCompact\": [\n      {\"hooks\": [{\"command\": \"strata claude-code hook\"}, {\"command\": \"date\"}]},\n      {\"hooks\": [{\"command\": \"strata claude-code hook\"}]},\n      {\"hooks\": [{\"command\": \"uptime\"}]}\n    ]\n  }\n}\n",
	"CRLF and LF":         "{\r\n  \"hooks\": {\n    \"PreCompact\": [\r\n      {\"hooks\": [{\"command\": \"strata claude-code hook\"}]}\n    ],\r\n    \"Stop\": [{\"hooks\": [{\"command\": \"strata claude-code hook\"}]}]\n  }\r\n}",
}

// withoutStrata returns the JSON value of a settings text with strata's
// handlers taken out, each group they leave empty with them.
func withoutStrata(t *testing.T, text string) any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatal(err)
	}
	hooks, _ := v["hooks"].(map[string]any)
	for event, groups := range hooks {
		kept := []any{}
		for _, g := range groups.([]any) {
			g := g.(map[string]any)
			hs := []any{}
			for _, h := range g["hooks"].([]any) {
				if c, _ := h.(map[string]any)["command"].(string); !companion.IsStrataHook(claudecode.Agent{}, c) {
					hs = append(hs, h)
				}
			}
			if len(hs) > 0 {
				g["hooks"] = hs
				kept = append(kept, g)
			}
		}
		hooks[event] = kept
	}
	return v
}

// TestUninstallHooks_StrataEverywhere: uninstall takes out every handler
// of strata's wherever it stands, with the groups it leaves empty, and
// nothing else.
func TestUninstallHooks_StrataEverywhere(t *testing.T) {
	a := claudecode.Agent{}
	for name, text := range settingsWithStrata {
		mine, err := companion.StrataHooks(a, "s.json", []byte(text))
		if err != nil || len(mine) == 0 {
			t.Fatalf("%s: %v %v", name, mine, err)
		}
		out, removed, _, err := companion.UninstallHooks(a, "s.json", []byte(text), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		left, err := companion.StrataHooks(a, "s.json", out)
		if err != nil || len(left) != 0 || len(removed) != len(mine) {
			t.Errorf("%s: removed %d of %d, left %v (%v):\n%q", name, len(removed), len(mine), left, err, out)
		}
		var got any
		if err := json.Unmarshal(out, &got); err != nil || !reflect.DeepEqual(withoutStrata(t, string(out)), withoutStrata(t, text)) {
			t.Errorf("%s: uninstall changed more than strata's hooks (%v):\n%q", name, err, out)
		}
	}
}

// jsoncAgent is Claude Code's adapter with settings read as JSONC, as
// Gemini CLI reads its own.
type jsoncAgent struct{ claudecode.Agent }

func (jsoncAgent) Settings() *companion.Settings {
	s := *claudecode.Agent{}.Settings()
	s.Comments = true
	return &s
}

// TestInstallHooks_JSONC: an agent that reads comments and trailing
// commas gets its file back byte for byte after install then uninstall,
// comments and trailing commas kept; one that does not refuses them.
func TestInstallHooks_JSONC(t *testing.T) {
	const text = "{\n  // the model\n  \"model\": \"opus\", /* why */\n  \"hooks\": {\n    \"Stop\": [ {\"hooks\": [{\"command\": \"date\"}]}, ],\n  },\n}\n"
	const command = "strata claude-code hook --db s.db"
	installed, _, created, err := companion.InstallHooks(jsoncAgent{}, "s.json", []byte(text), command)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(installed), "// the model") || !strings.Contains(string(installed), "/* why */") {
		t.Errorf("install lost a comment:\n%s", installed)
	}
	if mine, err := companion.StrataHooks(jsoncAgent{}, "s.json", installed); err != nil || len(mine) != 3 {
		t.Errorf("installed: %v %v\n%s", mine, err, installed)
	}
	back, _, _, err := companion.UninstallHooks(jsoncAgent{}, "s.json", installed, created)
	if err != nil || string(back) != text {
		t.Errorf("install then uninstall: %v\n%q\nwas\n%q", err, back, text)
	}
	_, _, _, err = companion.InstallHooks(claudecode.Agent{}, "s.json", []byte(text), command)
	var se *companion.SyntaxError
	if !errors.As(err, &se) || se.Line != 2 || se.Col != 3 {
		t.Errorf("Claude Code's settings with a comment: %v, want a SyntaxError at 2:3", err)
	}
}

// TestInstallHooks_SettingsCases: install then uninstall gives every
// settings file of testdata back byte for byte.
func TestInstallHooks_SettingsCases(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "settings", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no settings cases: %v", err)
	}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		installed, _, created, err := companion.InstallHooks(claudecode.Agent{}, f, text, "strata claude-code hook")
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		back, removed, _, err := companion.UninstallHooks(claudecode.Agent{}, f, installed, created)
		if err != nil || len(removed) != len(claudecode.HookEvents) || string(back) != string(text) {
			t.Errorf("%s: install then uninstall: %v, %d removed\n%q", f, err, len(removed), back)
		}
	}
}
