package main

import (
	"context"
	"io"

	"github.com/webhookd/webhookd/bench"
)

// webhookd bench: the throughput harness (see package bench and the
// docs/performance.md).
func init() {
	commands["bench"] = subcommand{func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
		return bench.Main(ctx, args, getenv, stdout, stderr)
	}, "measure throughput and latency against their ceilings on this machine (-list: the scenarios)"}
}
