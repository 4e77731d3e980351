// Command keel is Keel's command line: serve (the proxy), sim (the simulated
// provider fleet) and the tools built on them. This is the only place that
// wires every part together.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := rootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "keel:", err)
		os.Exit(exitCode(err))
	}
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "keel",
		Short:         "Keel: a transparent routing and resilience layer for LLM APIs",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd(), simCmd())
	root.AddCommand(benchCmd(), demoCmd())
	root.AddCommand(reportCmd(), keysCmd(), auditCmd())
	root.AddCommand(calibrateCmd(), shadowCmd())
	root.AddCommand(versionCmd())
	return root
}
