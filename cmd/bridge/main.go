package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
)

const usage = `bridge: a gateway between AI agent protocols (agentapi, aip, agentprotocol)

Usage:
  bridge serve    [flags]   run the gateway; --help for flags
  bridge agent    [flags]   run the built-in reference agent
  bridge demo     [flags]   reference agent + gateway in one process
  bridge call     [flags] TEXT   send TEXT to an agent and print the streamed reply
  bridge validate --config FILE  check a config file

Run 'bridge COMMAND --help' for the flags of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line until it is done or ctx ends, and returns
// the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmds := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"serve":    cmdServe,
		"agent":    cmdAgent,
		"demo":     cmdDemo,
		"call":     cmdCall,
		"validate": cmdValidate,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "bridge: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	err := cmd(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "bridge %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "bridge %s: %v\n", args[0], err)
		return 1
	}
}

var errUsage = errors.New("usage")

// newFlags returns a flag set that prints its usage to w.
func newFlags(name, synopsis string, w io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(w)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(w, "Usage: bridge %s\n\nFlags:\n%s", synopsis, fs.FlagUsages())
	}
	return fs
}
