package main

import "github.com/spf13/cobra"

// newClaudeCodeCommand returns `strata claude-code`: strata beside Claude
// Code, as hooks in its settings.
func newClaudeCodeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "claude-code",
		Short: "Carry verified state across Claude Code's compactions, as its hooks",
		Long: `strata beside Claude Code: hooks that, before Claude Code compacts a
session, import its transcript and compact it into a marker checked against
the raw log, and after the compaction give the session that state back.

install adds the hooks to Claude Code's settings, uninstall removes them,
status shows them, the store and its sessions.`,
	}
	cmd.AddCommand(newClaudeCodeInstallCommand(), newClaudeCodeUninstallCommand(), newClaudeCodeStatusCommand())
	return cmd
}
