package main

import (
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/npcd/npcd/internal/version"
)

// errFailed marks a command that ran and found failures (scenarios,
// checks): it exits 1 without a usage message.
var errFailed = errors.New("failed")

func exitCode(err error) int {
	if errors.Is(err, errFailed) {
		return 1
	}
	return 2
}

// rootCommand builds the npcd command tree.
func rootCommand(stdout, stderr io.Writer, getenv func(string) string) *cobra.Command {
	root := &cobra.Command{
		Use:           "npcd",
		Short:         "npcd gives game NPCs a memory that lasts",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.String(),
	}
	root.SetVersionTemplate("npcd {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(scenarioCommand(stdout, stderr, getenv), serveCommand(stdout, stderr, getenv), benchCommand(stdout, stderr), compactCommand(stdout, getenv), sleepCommand(stdout, getenv), aihistoryCommand(stdout, getenv))
	root.AddCommand(evalCommand(stdout, stderr))
	return root
}
