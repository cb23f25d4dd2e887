// Command npcd is the NPC memory daemon and its tools: serve the HTTP API,
// run scenarios, inspect NPCs, sleep or compact them, benchmark and evaluate.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(exitCode(err))
	}
}

// run executes one npcd command line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	root := rootCommand(stdout, stderr, getenv)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

// errorLine is how a failed command's error is printed: prefixed with
// "npcd: " once, also when the error comes from the API client, whose
// errors already name npcd.
func errorLine(err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, "npcd: ") {
		return msg
	}
	return "npcd: " + msg
}
