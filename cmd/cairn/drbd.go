package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/agents/volume"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

// drbdCmd shows what the control plane asks of a node for a resource, read from the
// running control plane's per-node desired state (CAIRN_NODES).
func drbdCmd() *cobra.Command {
	var natsURL, creds, node, root string
	c := &cobra.Command{Use: "drbd", Short: "Show the DRBD resource file and seeding plan a node gets"}
	fetch := func(ctx context.Context, rd string) (drbd.Desired, error) {
		nc, err := connect(natsURL, creds, "cairn-drbd")
		if err != nil {
			return drbd.Desired{}, err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return drbd.Desired{}, err
		}
		names := events.NewNames(prefix)
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		stream, err := js.Stream(ctx, names.NodesStream())
		if err != nil {
			return drbd.Desired{}, fmt.Errorf("stream %s: %w", names.NodesStream(), err)
		}
		subject := names.Node(node, "drbd", rd)
		m, err := stream.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return drbd.Desired{}, exitWith(1, "no desired state on %s: resource %s has no replica on node %s", subject, rd, node)
		}
		if err != nil {
			return drbd.Desired{}, err
		}
		if len(m.Data) == 0 {
			return drbd.Desired{}, exitWith(1, "resource %s was removed from node %s (the agent tears it down)", rd, node)
		}
		var d drbd.Desired
		if err := json.Unmarshal(m.Data, &d); err != nil {
			return d, fmt.Errorf("%s: %w", subject, err)
		}
		return d, nil
	}
	// disks maps volume numbers to the local disk paths the node's agent uses.
	disks := func(d drbd.Desired) (map[int]string, error) {
		out := map[int]string{}
		if d.Local == nil || d.Local.Diskless {
			return out, nil
		}
		for _, v := range d.Volumes {
			p, err := volume.DevicePath(d.Local.Provider, d.Local.Pool, root, backing.VolumeName(d.Resource, v.Number))
			if err != nil {
				return nil, err
			}
			out[v.Number] = p
		}
		return out, nil
	}
	render := &cobra.Command{
		Use:   "render RESOURCE --node NODE",
		Short: "Print the resource file NODE writes for RESOURCE",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := fetch(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			local, err := disks(d)
			if err != nil {
				return err
			}
			out, err := drbdutils.Render(d, local)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	seedPlan := &cobra.Command{
		Use:   "seed-plan RESOURCE --node NODE",
		Short: "Print the drbdmeta set-gi calls NODE makes for RESOURCE's new disk, one per line",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := fetch(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if d.Local == nil || d.Local.Diskless {
				fmt.Fprintf(w, "# %s on %s is diskless: no metadata, no seeding\n", d.Resource, d.Node)
				return nil
			}
			local, err := disks(d)
			if err != nil {
				return err
			}
			if d.Local.FullSync {
				fmt.Fprintf(w, "# full initial sync: fresh metadata, no set-gi for the volumes not listed below\n")
			}
			minors := map[int]int{}
			for _, r := range d.Replicas {
				if r.Node == d.Node {
					minors = r.Minors
				}
			}
			for _, s := range d.Local.Seeds {
				fmt.Fprintln(w, execx.Format(drbdutils.SeedArgv(minors[s.Volume], local[s.Volume], s)))
			}
			return nil
		},
	}
	for _, sub := range []*cobra.Command{render, seedPlan} {
		f := sub.Flags()
		f.StringVar(&node, "node", "", "the node (required)")
		f.StringVar(&natsURL, "nats", defaultNATS, "NATS server URL of the control plane")
		f.StringVar(&creds, "creds", "", "NATS credentials file")
		f.StringVar(&root, "root", "", "the node agent's --root (sim mode), prefixing file-backed disk paths")
		_ = sub.MarkFlagRequired("node")
		c.AddCommand(sub)
	}
	return c
}
