package main

import "github.com/spf13/cobra"

// newClaudeCodeCommand returns `strata claude-code`: strata beside Claude
// Code, as hooks in its settings.
func newClaudeCodeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "claude-code",
		Short: "Carry verified state across Claude Code's compactions, as its hooks",
		Long: `Run strata beside Claude Code (docs/claude-code.md). Claude Code runs
"strata claude-code hook" before it compacts a session (PreCompact) and
right after (SessionStart, source compact): strata imports the session's
transcript into a store, compacts it where Claude Code cuts into a marker
checked against the raw log, and adds to the compacted context the state
the raw transcript implies there.

install adds the hooks to Claude Code's settings, uninstall removes them,
status shows them, the store and its sessions; hook is what Claude Code runs.`,
	}
	cmd.AddCommand(newClaudeCodeInstallCommand(), newClaudeCodeUninstallCommand(), newClaudeCodeStatusCommand(),
		newClaudeCodeHookCommand())
	return cmd
}
