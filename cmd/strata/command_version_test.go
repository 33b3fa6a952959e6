package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-go/strata/backend/boltfile"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	out := mustCLI(t, "version")
	if got := mustCLI(t, "--version"); got != out {
		t.Errorf("--version %q, version %q", got, out)
	}
	for _, want := range []string{"strata ", "\ngo: " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n",
		"\ndatabase format: " + strconv.Itoa(boltfile.FormatVersion) + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("version lacks %q:\n%s", want, out)
		}
	}
	var v versionInfo
	js := mustCLI(t, "version", "--json")
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	if v.Version == "" || v.GoVersion != runtime.Version() || v.FormatVersion != boltfile.FormatVersion || v.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("version --json: %s", js)
	}
	if !strings.HasPrefix(out, "strata "+v.Version+"\n") {
		t.Errorf("text version %q, JSON %q", out, v.Version)
	}
	wantCode(t, cli(t, "", "version", "x"), exitUsage)
}

// The build's recorded module version and VCS stamp are what version
// prints; a build without them is "(devel)".
func TestVersion_BuildInfo(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/strata-go/strata", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2025-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"}, {Key: "GOOS", Value: "ignored"}}}
	var b bytes.Buffer
	if err := runVersion(&b, bi, false); err != nil {
		t.Fatal(err)
	}
	want := "strata v1.2.3\nmodule: github.com/strata-go/strata\nvcs revision: abc123\nvcs time: 2025-01-02T03:04:05Z\nvcs modified: true\n" +
		"go: go1.99.1 " + runtime.GOOS + "/" + runtime.GOARCH + "\ndatabase format: " + strconv.Itoa(boltfile.FormatVersion) + "\n"
	if b.String() != want {
		t.Errorf("version:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := runVersion(&b, bi, true); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if v["version"] != "v1.2.3" || v["vcs_revision"] != "abc123" || v["vcs_modified"] != true || v["go_version"] != "go1.99.1" ||
		v["format_version"] != float64(boltfile.FormatVersion) {
		t.Errorf("version --json: %s", b.String())
	}

	devel := buildVersion(&debug.BuildInfo{Main: debug.Module{Path: "m"}})
	if devel.Version != "(devel)" || devel.Revision != "" || devel.Modified != nil || devel.GoVersion != runtime.Version() {
		t.Errorf("no version recorded: %+v", devel)
	}
	if none := buildVersion(nil); none.Version != "(devel)" || none.Module != "" {
		t.Errorf("no build info: %+v", none)
	}
}
