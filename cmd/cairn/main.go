// Command cairn is the one binary of the Cairn control plane: serve, agent, cmd, audit,
// views. Run `cairn --help` for the list.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

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
		l = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.RFC3339})
	} else {
		l = zerolog.New(os.Stderr)
	}
	return l.Level(lvl).With().Timestamp().Logger()
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
	root.AddCommand(serveCmd(), agentCmd(), cmdCmd(), auditCmd(), viewsCmd(), domainsCmd(), drbdCmd(), authCmd(), mmpCmd(), simCmd())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := root.ExecuteContext(ctx)
	stop()
	var ee exitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.code)
	case err != nil:
		fmt.Fprintln(os.Stderr, "cairn:", err)
		os.Exit(2)
	}
}

// exitWith prints a message to stderr and makes the process exit with code.
func exitWith(code int, format string, args ...any) error {
	fmt.Fprintf(os.Stderr, "cairn: "+format+"\n", args...)
	return exitError{code}
}
