package main

import "github.com/spf13/cobra"

// newClaudeCodeCommand returns `strata claude-code`, the commands that run
// strata beside Claude Code.
func newClaudeCodeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "claude-code",
		Short: "Run strata beside Claude Code: the hooks that carry checked state across its compactions",
		Long: `Run strata beside Claude Code (docs/claude-code.md). Claude Code runs
"strata claude-code hook" before it compacts a session (PreCompact) and
right after (SessionStart, source compact): strata imports the session's
transcript into a store, compacts it where Claude Code cuts, and adds to
the compacted context the state the raw transcript implies there.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("claude-code needs a command: %s", "hook")
		},
	}
	cmd.AddCommand(newClaudeCodeHookCommand())
	return cmd
}
