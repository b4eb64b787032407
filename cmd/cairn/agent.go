package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/cairn-io/cairn/agents"
	"github.com/cairn-io/cairn/agents/drbdagent"
	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/agents/spagent"
	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/drbd/drbdutils"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/metricset"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
)

func agentCmd() *cobra.Command {
	var (
		opts       agents.Options
		natsURL    string
		creds      string
		root       string
		kernel     string
		simDir     string
		drbdsetup  string
		execTO     time.Duration
		metrics    string
		backupMiBs float64
		extFiles   []string
		revDir     string
		capEvery   time.Duration
	)
	var zpoolFlags *zpoolAgentFlags // zpool reconciler flags (cmd/cairn/agent_zpool.go)
	c := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent of one node: carry out its DRBD desired state, report status, send heartbeats",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Names = events.NewNames(prefix)
			opts.Log = newLogger()
			opts.AllowExtFiles = drbdagent.AllowedPrefixes(extFiles)
			opts.RevisionDir = revDir
			if opts.RevisionDir == "" {
				opts.RevisionDir = filepath.Join(drbdagent.NewPaths(root).Root, "var", "lib", "cairn", "revisions")
			}
			if !cmd.Flags().Changed("zpool-state-dir") {
				zpoolFlags.stateDir = filepath.Join(drbdagent.NewPaths(root).Root, "var", "lib", "cairn", "zpool")
			}
			ctx := cmd.Context()
			hostid, err := zpoolFlags.hostID()
			if err != nil {
				return err
			}
			// Its own inbox prefix: with per-node users (serve --auth) an agent may
			// subscribe to _INBOX.<prefix>.node.<node>.> only.
			nc, err := connect(natsURL, creds, "cairn-agent-"+opts.Node, nats.CustomInboxPrefix(opts.Names.NodeInbox(opts.Node)))
			if err != nil {
				return err
			}
			defer nc.Close()
			rec, run, err := newDRBDAgent(ctx, opts, nc, root, kernel, simDir, drbdsetup, execTO, int64(backupMiBs*(1<<20)), extFiles)
			if err != nil {
				return err
			}
			// Before any desired state: resume I/O a snapshot left suspended (its bound
			// passed while the agent was away) or that no snapshot holds.
			if err := rec.Recover(ctx); err != nil {
				opts.Log.Error().Err(err).Msg("resuming suspended I/O at start")
			}
			opts.Reconciler = rec
			// zpool reconciler (agents/zpoolagent): <prefix>.node.<node>.zpool.* go to it,
			// everything else to the DRBD reconciler.
			stopZpool, err := zpoolFlags.wire(nc, &opts, hostid)
			if err != nil {
				return err
			}
			defer stopZpool()
			// Storage pools (agents/spagent): <prefix>.node.<node>.sp.* are measured
			// and reported every --capacity-interval.
			reporter := spagent.New(spagent.Config{Node: opts.Node, Names: opts.Names, Root: drbdagent.NewPaths(root).Root,
				Exec: &execx.Runner{Timeout: execTO, Log: opts.Log}, Pub: nc, Log: opts.Log.With().Str("part", "storage-pools").Logger(), Interval: capEvery})
			opts.Reconciler = agents.Mux{Names: opts.Names, Kinds: map[string]agents.Reconciler{spagent.Kind: reporter}, Default: opts.Reconciler}
			go reporter.Run(ctx)
			a, err := agents.New(nc, opts)
			if err != nil {
				return err
			}
			if metrics != "" {
				l, err := net.Listen("tcp", metrics)
				if err != nil {
					return fmt.Errorf("--metrics %s: %w", metrics, err)
				}
				mux := http.NewServeMux()
				mux.Handle("GET /metrics", metricset.AgentHandler())
				srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
				go func() { _ = srv.Serve(l) }()
				defer srv.Close()
			}
			go run(ctx)
			return a.Run(ctx)
		},
	}
	f := c.Flags()
	f.StringVar(&opts.Node, "node", "", "name of the node this agent runs (required)")
	f.StringVar(&natsURL, "nats", defaultNATS, "NATS server URL")
	f.StringVar(&creds, "creds", "", "credentials file of this node's user (cairn auth node-creds NODE), or a NATS .creds file")
	f.DurationVar(&opts.HeartbeatInterval, "heartbeat-interval", 5*time.Second, "heartbeat period")
	zpoolFlags = addZpoolAgentFlags(f)
	f.IntVar(&opts.Workers, "workers", 8, "resources reconciled at once")
	f.StringVar(&root, "root", "/", "host root: DRBD config under ROOT/etc/drbd.d, state under ROOT/var/lib/cairn/agent, file pools under ROOT")
	f.StringVar(&kernel, "kernel", "real", "DRBD kernel: real (drbdadm adjust, drbdsetup) or sim (simulated DRBD on file-backed disks, real drbdadm/drbdmeta)")
	f.StringVar(&simDir, "sim-dir", "", "shared directory of the simulated DRBD network (default: a \"sim\" directory beside --root)")
	f.StringVar(&drbdsetup, "drbdsetup", "", "drbdsetup program (default: drbdsetup from PATH)")
	f.DurationVar(&execTO, "exec-timeout", execx.DefaultTimeout, "timeout of every DRBD and backing-volume command (zpool has --zpool-import-timeout)")
	f.StringVar(&revDir, "revision-dir", "", "where the highest desired-state revision per subject is kept across restarts (default ROOT/var/lib/cairn/revisions)")
	f.DurationVar(&capEvery, "capacity-interval", 30*time.Second, "how often the node's storage pools are measured and reported (statfs, vgs/lvs, zfs list)")
	f.StringVar(&metrics, "metrics", "", "serve Prometheus metrics on this address (e.g. 127.0.0.1:9370); off when empty")
	f.Float64Var(&backupMiBs, "backup-bandwidth", 0, "limit what this node's backup uploads send together, in MiB/s (0: no limit)")
	f.StringSliceVar(&extFiles, "allow-ext-files", nil, "host paths external files (LINSTOR's /v1/files, e.g. linstor-gateway's /etc/drbd-reactor.d) may be written under, comma-separated; none by default")
	_ = c.MarkFlagRequired("node")
	return c
}

// newDRBDAgent wires the DRBD reconciler: one executor for every program, the kernel
// (real or simulated) and the status publisher. run follows events2 until ctx ends.
func newDRBDAgent(ctx context.Context, opts agents.Options, nc *nats.Conn, root, kernel, simDir, drbdsetup string, timeout time.Duration, backupBandwidth int64, extFiles []string) (*drbdagent.Reconciler, func(context.Context), error) {
	log := opts.Log.With().Str("node", opts.Node).Logger()
	exec := &execx.Runner{Timeout: timeout, Log: log}
	paths := drbdagent.NewPaths(root)
	cfg := drbdagent.Config{Node: opts.Node, Names: opts.Names, Paths: paths, Exec: exec, Pub: nc, Log: log,
		Remotes: remoteStores(nc, opts.Names.AgentRemote(opts.Node), opts.Names.AgentReceived(opts.Node)), BackupBandwidth: backupBandwidth, AllowExtFiles: extFiles}
	switch kernel {
	case "real":
		cfg.Kernel = &drbdagent.Real{Exec: exec, Lines: exec, Adm: drbdutils.Adm{Config: paths.MainConf}, Drbdsetup: drbdsetup}
		cfg.LoopDevices = true
	case "sim":
		// drbd-utils without the kernel module: silence the modinfo probe.
		exec.Env = []string{"DRBD_DRIVER_VERSION_OVERRIDE=9.2.0"}
		if simDir == "" {
			simDir = drbdagent.DefaultSimDir(paths.Root)
		}
		abs, err := filepath.Abs(simDir)
		if err != nil {
			return nil, nil, err
		}
		sim := &drbdagent.Sim{Node: opts.Node, Root: paths.Root, Dir: abs, Exec: exec, MainConf: paths.MainConf, Log: log}
		// The node is alive while this process runs: its peers see it gone when it
		// ends, however it ends (the sim's model of a dead host).
		release, err := sim.Hold()
		if err != nil {
			return nil, nil, err
		}
		cfg.Kernel, cfg.PretendHost = sim, true
		log.Info().Str("root", paths.Root).Str("sim_dir", abs).Msg("simulated DRBD kernel")
		rec, err := drbdagent.New(cfg)
		if err != nil {
			release()
			return nil, nil, err
		}
		return rec, func(ctx context.Context) { defer release(); rec.Run(ctx) }, nil
	default:
		return nil, nil, fmt.Errorf("--kernel %q: must be real or sim", kernel)
	}
	rec, err := drbdagent.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	return rec, rec.Run, nil
}

// simCmd holds the tools of the simulated kernel.
func simCmd() *cobra.Command {
	c := &cobra.Command{Use: "sim", Short: "Tools of the simulated DRBD kernel (cairn agent --kernel sim)"}
	var root, simDir string
	w := &cobra.Command{
		Use:   "write RESOURCE BLOCKS",
		Short: "Simulate an application writing BLOCKS 4 KiB blocks to RESOURCE on the node under --root (and its connected peers)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var blocks uint64
			if _, err := fmt.Sscan(args[1], &blocks); err != nil || blocks == 0 {
				return fmt.Errorf("BLOCKS %q: must be a positive number", args[1])
			}
			if simDir == "" {
				simDir = drbdagent.DefaultSimDir(drbdagent.NewPaths(root).Root)
			}
			exec := &execx.Runner{Timeout: execx.DefaultTimeout, Log: newLogger(), Env: []string{"DRBD_DRIVER_VERSION_OVERRIDE=9.2.0"}}
			abs, _ := filepath.Abs(root)
			n, err := drbdagent.SimWrite(cmd.Context(), exec, simDir, abs, args[0], blocks)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d blocks written since day 0\n", args[0], n)
			return nil
		},
	}
	w.Flags().StringVar(&root, "root", "", "root of the node to write on (as given to cairn agent --root)")
	w.Flags().StringVar(&simDir, "sim-dir", "", "shared simulation directory (default: a \"sim\" directory beside --root)")
	_ = w.MarkFlagRequired("root")
	var checkRoot, checkDir string
	check := &cobra.Command{
		Use:   "check",
		Short: "Print every time the data oracle saw two disks declared in sync with different data; exit 1 if it did",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := checkDir
			switch {
			case dir == "" && checkRoot == "":
				return exitWith(2, "sim check: give --sim-dir or --root")
			case dir == "":
				dir = drbdagent.DefaultSimDir(drbdagent.NewPaths(checkRoot).Root)
			}
			found, err := drbdagent.SimDivergences(dir)
			if err != nil {
				return err
			}
			for _, line := range found {
				fmt.Fprintln(cmd.OutOrStdout(), line)
			}
			if len(found) > 0 {
				return exitError{1}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: every pair of disks declared in sync held the same data\n", dir)
			return nil
		},
	}
	check.Flags().StringVar(&checkDir, "sim-dir", "", "shared simulation directory")
	check.Flags().StringVar(&checkRoot, "root", "", "root of any node of the simulation (its sim directory is beside it)")
	role := func(primary bool) *cobra.Command {
		use, short := "demote", "Demote the resource on the node with --root to Secondary (the application closed the device)"
		if primary {
			use, short = "promote", "Promote the resource on the node with --root to Primary (an application opened the device): needs UpToDate data and no other Primary"
		}
		var root, dir string
		cc := &cobra.Command{Use: use + " RESOURCE", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				if dir == "" {
					dir = drbdagent.DefaultSimDir(drbdagent.NewPaths(root).Root)
				}
				abs, _ := filepath.Abs(root)
				if err := drbdagent.SimSetRole(dir, abs, args[0], primary); err != nil {
					return exitWith(1, "%v", err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %sd\n", args[0], use)
				return nil
			}}
		cc.Flags().StringVar(&root, "root", "", "root of the node (as given to cairn agent --root)")
		cc.Flags().StringVar(&dir, "sim-dir", "", "shared simulation directory (default: a \"sim\" directory beside --root)")
		_ = cc.MarkFlagRequired("root")
		return cc
	}
	var failRoot, failDir string
	fail := &cobra.Command{Use: "fail-disk RESOURCE", Short: "Fail the disk of the resource on the node with --root (an I/O error: DRBD detaches it, the replica stays up diskless)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if failDir == "" {
				failDir = drbdagent.DefaultSimDir(drbdagent.NewPaths(failRoot).Root)
			}
			abs, _ := filepath.Abs(failRoot)
			if err := drbdagent.SimFailDisk(failDir, abs, args[0]); err != nil {
				return exitWith(1, "%v", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: disk failed (detached)\n", args[0])
			return nil
		}}
	fail.Flags().StringVar(&failRoot, "root", "", "root of the node (as given to cairn agent --root)")
	fail.Flags().StringVar(&failDir, "sim-dir", "", "shared simulation directory (default: a \"sim\" directory beside --root)")
	_ = fail.MarkFlagRequired("root")
	c.AddCommand(w, check, role(true), role(false), fail)
	return c
}

// remoteStores opens remotes for the agent: it asks a serve for a remote's credentials on
// subject (server.RemoteReply), each time it needs them; they stay in memory only. The
// cluster's received store is read through a serve on received.
func remoteStores(nc *nats.Conn, subject, received string) func(ctx context.Context, remote string) (drbdagent.RemoteStore, error) {
	return func(ctx context.Context, remote string) (drbdagent.RemoteStore, error) {
		body, _ := json.Marshal(server.RemoteRequest{Remote: remote})
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		msg, err := nc.RequestWithContext(rctx, subject, body)
		if err != nil {
			return nil, fmt.Errorf("ask a serve for its credentials: %w", err)
		}
		var r server.RemoteReply
		if err := json.Unmarshal(msg.Data, &r); err != nil {
			return nil, fmt.Errorf("credentials reply: %w", err)
		}
		if r.Error != "" {
			return nil, errors.New(r.Error)
		}
		return server.OpenRemote(r, server.ReceivedReader{NC: nc, Subject: received})
	}
}
