package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: go run ./bench COMMAND [flags]

commands:
  run       run the scenarios and write the report (see run --help)
  agent     serve the load-test agent, in the Agent API, AIP or the Agent Protocol (a role the harness starts)
  bridge    serve the bridge in front of an agent of one of those protocols (a role)
  revproxy  serve httputil.ReverseProxy in front of an agent (a role)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	args := os.Args[2:]
	switch os.Args[1] {
	case "run":
		err = cmdRun(ctx, args)
	case "agent":
		err = cmdAgent(ctx, args)
	case "bridge":
		err = cmdBridge(ctx, args)
	case "revproxy":
		err = cmdRevProxy(ctx, args)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "bench: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	var ec exitCode
	if errors.As(err, &ec) {
		os.Exit(int(ec))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// exitCode passes a pinned child's exit status through.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
