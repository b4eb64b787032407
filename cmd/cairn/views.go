package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

func printJSON(v any) {
	out, _ := json.MarshalIndent(v, "", "  ")
	fmt.Println(string(out))
}

func viewsCmd() *cobra.Command {
	c := &cobra.Command{Use: "views", Short: "Rebuild, digest or time-travel the views (offline, on --data)"}
	var dataDir string
	var retention time.Duration
	c.PersistentFlags().StringVar(&dataDir, "data", "data", "data directory of a stopped `cairn serve`")
	c.PersistentFlags().DurationVar(&retention, "command-retention", projections.DefaultCommandRetention, "serve's --command-retention (the views' digest depends on it); 0: for good")

	rebuild := &cobra.Command{
		Use:   "rebuild",
		Short: "Replay the events stream from sequence 1 into fresh views (serve must be stopped); prints the digest",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			off, err := server.OpenData(dataDir, prefix)
			if err != nil {
				return err
			}
			defer off.Close()
			off.CommandRetention = retentionFlag(retention)
			d, err := off.Rebuild(cmd.Context(), newLogger())
			if err != nil {
				return err
			}
			printJSON(d)
			return nil
		},
	}
	digest := &cobra.Command{
		Use:   "digest",
		Short: "Print the digest of the views as they are stored (serve must be stopped; running: GET /cairn/v1/views/digest)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := os.Stat(filepath.Join(dataDir, "views")); err != nil {
				return fmt.Errorf("%s holds no views store (%v): give the --data directory of a cairn serve", dataDir, err)
			}
			db, err := projections.OpenExisting(filepath.Join(dataDir, "views"))
			if err != nil {
				return fmt.Errorf("%w (is cairn serve running on %s, or is it not its data directory?)", err, dataDir)
			}
			defer db.Close()
			d, err := db.Digest()
			if err != nil {
				return err
			}
			printJSON(d)
			return nil
		},
	}
	var (
		seq     uint64
		dump    bool
		natsURL string
		creds   string
	)
	at := &cobra.Command{
		Use:   "at",
		Short: "Build the views as of sequence N into a temporary store and print their digest (--dump: and content)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if seq == 0 {
				return fmt.Errorf("--seq is required and must be at least 1")
			}
			var js jetstream.JetStream
			if natsURL != "" {
				nc, err := connect(natsURL, creds, "cairn-views-at")
				if err != nil {
					return err
				}
				defer nc.Close()
				if js, err = jetstream.New(nc); err != nil {
					return err
				}
			} else {
				off, err := server.OpenData(dataDir, prefix)
				if err != nil {
					return err
				}
				defer off.Close()
				js = off.JS
			}
			tmp, err := projections.OpenInMem()
			if err != nil {
				return err
			}
			defer tmp.Close()
			d, err := server.ProjectInto(cmd.Context(), tmp, js, events.NewNames(prefix), seq, retentionFlag(retention), newLogger())
			if err != nil {
				return err
			}
			if !dump {
				printJSON(d)
				return nil
			}
			views, err := tmp.Dump()
			if err != nil {
				return err
			}
			printJSON(map[string]any{"digest": d, "views": views})
			return nil
		},
	}
	at.Flags().Uint64Var(&seq, "seq", 0, "stream sequence to stop at (inclusive)")
	at.Flags().BoolVar(&dump, "dump", false, "print every view key and value too")
	at.Flags().StringVar(&natsURL, "nats", "", "read a running deployment's stream instead of --data")
	at.Flags().StringVar(&creds, "creds", "", "NATS credentials file for --nats (cairn serve --auth: <data>/auth/cairn.creds)")
	c.AddCommand(rebuild, digest, at)
	return c
}

// retentionFlag turns a --command-retention value into server's convention: 0 on the
// command line keeps ids for good (negative for server).
func retentionFlag(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
