// Command cairn is the one binary of the Cairn control plane: serve, agent, cmd, audit,
// views. Run `cairn --help` for the list.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/mattn/go-isatty"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
)

// exitError carries a process exit code out of a command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

var (
	logLevel  string
	logFormat string
	prefix    string
)

func newLogger() zerolog.Logger {
	lvl, err := zerolog.ParseLevel(logLevel)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	zerolog.TimeFieldFormat = time.RFC3339Nano
	var l zerolog.Logger
	if logFormat == "console" {
		// Colour only on a terminal: codes in a log file are noise.
		l = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.RFC3339, NoColor: !isatty.IsTerminal(os.Stderr.Fd())})
	} else {
		l = zerolog.New(os.Stderr)
	}
	return l.Level(lvl).With().Timestamp().Logger()
}

var cpuProfile string

// startCPUProfile starts a CPU profile into path ("" = none); main stops it at exit.
func startCPUProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--cpu-profile: %w", err)
	}
	return pprof.StartCPUProfile(f)
}

func main() {
	root := &cobra.Command{
		Use:           "cairn",
		Short:         "Cairn: an event-sourced control plane for replicated block storage",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.PersistentFlags().StringVar(&logFormat, "log-format", "json", "log format: json or console")
	root.PersistentFlags().StringVar(&prefix, "prefix", "cairn", "subject prefix of the deployment (one token)")
	root.AddCommand(serveCmd(), agentCmd(), cmdCmd(), auditCmd(), viewsCmd(), domainsCmd(), drbdCmd(), authCmd(), mmpCmd(), simCmd(), waitCmd(), leaseCmd(), getCmd(), describeCmd(), versionCmd())
	refuseUnknownSubcommands(root)

	root.PersistentFlags().StringVar(&cpuProfile, "cpu-profile", "", "write a Go CPU profile of the run to this file (go tool pprof)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return startCPUProfile(cpuProfile) }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := root.ExecuteContext(ctx)
	stop()
	pprof.StopCPUProfile()
	var ee exitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.code)
	case err != nil:
		fmt.Fprintln(os.Stderr, "cairn:", err)
		os.Exit(2)
	}
}

// versionCmd prints the build's version (cairn.Version; LINSTOR's API shows the same).
func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print this build's version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			fmt.Println("cairn", cairn.Version)
		},
	}
}

// refuseUnknownSubcommands makes every command that only groups others (no Run of its
// own) refuse an unknown subcommand with exit 2 and a suggestion, instead of printing
// its help and exiting 0 (cobra's default for a parent below the root).
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if c.Run != nil || c.RunE != nil || !c.HasSubCommands() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return exitWith(2, "%s (see %s --help)", msg, cmd.CommandPath())
	}
}

// exitWith prints a message to stderr and makes the process exit with code.
func exitWith(code int, format string, args ...any) error {
	fmt.Fprintf(os.Stderr, "cairn: "+format+"\n", args...)
	return exitError{code}
}
