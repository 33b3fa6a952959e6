package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/strata-go/strata/backend/boltfile"
)

// versionInfo is what `strata version` prints.
type versionInfo struct {
	Version       string `json:"version"` // the main module's version, or "(devel)"
	Module        string `json:"module,omitempty"`
	Revision      string `json:"vcs_revision,omitempty"`
	Time          string `json:"vcs_time,omitempty"`
	Modified      *bool  `json:"vcs_modified,omitempty"`
	GoVersion     string `json:"go_version"`
	Platform      string `json:"platform"`       // GOOS/GOARCH
	FormatVersion int    `json:"format_version"` // of the database files this strata writes
}

// readBuildInfo returns the build information of this executable: what
// the Go toolchain recorded in it (module version, VCS stamp), or nil.
func readBuildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

// buildVersion returns the version information of a build bi (nil: none
// recorded).
func buildVersion(bi *debug.BuildInfo) versionInfo {
	v := versionInfo{Version: "(devel)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		FormatVersion: boltfile.FormatVersion}
	if bi == nil {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	v.Module = bi.Main.Path
	if bi.GoVersion != "" {
		v.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			m := s.Value == "true"
			v.Modified = &m
		}
	}
	return v
}

// versionText returns the text `strata version` and `strata --version`
// print, one "key: value" line each.
func versionText(bi *debug.BuildInfo) string {
	v := buildVersion(bi)
	var b strings.Builder
	fmt.Fprintf(&b, "strata %s\n", v.Version)
	if v.Module != "" {
		fmt.Fprintf(&b, "module: %s\n", v.Module)
	}
	if v.Revision != "" {
		fmt.Fprintf(&b, "vcs revision: %s\n", v.Revision)
	}
	if v.Time != "" {
		fmt.Fprintf(&b, "vcs time: %s\n", v.Time)
	}
	if v.Modified != nil {
		fmt.Fprintf(&b, "vcs modified: %t\n", *v.Modified)
	}
	fmt.Fprintf(&b, "go: %s %s\n", v.GoVersion, v.Platform)
	fmt.Fprintf(&b, "database format: %d\n", v.FormatVersion)
	return b.String()
}

// newVersionCommand returns `strata version`.
func newVersionCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print the version of strata and of the database format it writes",
		Long: `Print this strata's version: the module version it was built from
("(devel)" for a build from a checkout), the VCS revision, time and whether
the tree was modified when the build recorded them, the Go version and
platform, and the database format version it writes and reads. strata
--version prints the same.

--json prints {"version", "module", "vcs_revision", "vcs_time",
"vcs_modified", "go_version", "platform", "format_version"}, the vcs_ and
module fields only when recorded.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runVersion(cmd.OutOrStdout(), readBuildInfo(), asJSON)
		},
	}
	addJSONFlag(cmd, &asJSON, "JSON")
	return cmd
}

// runVersion prints the version of build bi.
func runVersion(out io.Writer, bi *debug.BuildInfo, asJSON bool) error {
	if asJSON {
		return writeJSON(out, buildVersion(bi))
	}
	_, err := io.WriteString(out, versionText(bi))
	return err
}
