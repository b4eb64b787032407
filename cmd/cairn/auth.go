package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-io/cairn/cmd/cairn/server/natsauth"
	"github.com/spf13/cobra"
)

func authCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "auth",
		Short: "Credentials: NATS users of `cairn serve --auth`, bearer tokens of the HTTP API",
		Long: `Credentials of the NATS users of a cairn serve --auth deployment. They are derived
from the master key in <data>/auth/master.key (created by the first serve --auth), so
they can be produced at any time, offline, for any node name, and the running server
accepts them without a restart. Keep the files secret (mode 0600).`,
	}
	var dataDir, out string
	write := func(creds []byte) error {
		if out == "" || out == "-" {
			_, err := os.Stdout.Write(creds)
			return err
		}
		if err := os.WriteFile(out, creds, 0o600); err != nil {
			return err
		}
		return os.Chmod(out, 0o600) // an existing file keeps its mode otherwise
	}
	open := func() (*natsauth.Authority, error) {
		return natsauth.Open(filepath.Join(dataDir, natsauth.DirName), false)
	}
	nodeCreds := &cobra.Command{
		Use:   "node-creds NODE",
		Short: "Print (or write with -o) the credentials of NODE's agent: cairn agent --node NODE --creds FILE",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := open()
			if err != nil {
				return err
			}
			creds, err := a.NodeCreds(args[0])
			if err != nil {
				return fmt.Errorf("NODE: %w", err)
			}
			return write(creds)
		},
	}
	controlCreds := &cobra.Command{
		Use:   "control-creds",
		Short: "Print (or write with -o) the control user's credentials (the same as <data>/auth/cairn.creds)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := open()
			if err != nil {
				return err
			}
			creds, err := a.ControlCreds()
			if err != nil {
				return err
			}
			return write(creds)
		},
	}
	for _, sub := range []*cobra.Command{nodeCreds, controlCreds} {
		sub.Flags().StringVar(&dataDir, "data", "data", "data directory of cairn serve --auth (holds auth/master.key)")
		sub.Flags().StringVarP(&out, "output", "o", "", "write to this file (mode 0600) instead of stdout")
		c.AddCommand(sub)
	}
	c.AddCommand(tokenCmd())
	return c
}
