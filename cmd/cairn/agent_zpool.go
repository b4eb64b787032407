package main

import (
	"os"

	"time"

	"github.com/cairn-io/cairn"

	"github.com/cairn-io/cairn/agents"
	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/agents/zpoolagent"
	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"
)

// zpoolAgentFlags are cairn agent's flags for the shared-pool reconciler
// (agents/zpoolagent, docs/mmp.md "The agent's pool flow").
type zpoolAgentFlags struct {
	bin             string
	hostid          string
	splHostIDPath   string
	stateDir        string
	interval        time.Duration
	importIntervals uint64
	watchEvery      time.Duration
	retry           time.Duration
	importTimeout   time.Duration
}

func addZpoolAgentFlags(f *pflag.FlagSet) *zpoolAgentFlags {
	z := &zpoolAgentFlags{}
	bin := os.Getenv("CAIRN_ZPOOL_BIN")
	if bin == "" {
		bin = "zpool"
	}
	f.StringVar(&z.bin, "zpool-bin", bin, "zpool program (default $CAIRN_ZPOOL_BIN, else zpool in PATH)")
	f.StringVar(&z.hostid, "hostid", "", "this host's hostid in hex for the MMP check and watcher (default: the SPL module's, else /etc/hostid, read again at every grant)")
	f.StringVar(&z.splHostIDPath, "spl-hostid-path", mmp.SPLHostIDPath, "the SPL module's hostid file: an agent whose --hostid differs from it refuses to start")
	_ = f.MarkHidden("spl-hostid-path")
	f.StringVar(&z.stateDir, "zpool-state-dir", "ROOT/var/lib/cairn/zpool", "where the agent keeps contested-pool latches across restarts (created when first needed; \"\" = memory only)")
	f.DurationVar(&z.interval, "mmp-interval", mmp.DefaultInterval, "zfs_multihost_interval of this host (activity check tunable)")
	f.Uint64Var(&z.importIntervals, "mmp-import-intervals", mmp.DefaultImportIntervals, "zfs_multihost_import_intervals of this host (activity check tunable)")
	f.DurationVar(&z.watchEvery, "zpool-watch-interval", 0, "poll period of the watcher after import (0: the pool's MMP interval, 100ms-1s)")
	f.DurationVar(&z.retry, "zpool-retry", 30*time.Second, "first wait before a refused or failed grant is checked again (doubles up to 5m)")
	f.DurationVar(&z.importTimeout, "zpool-import-timeout", 5*time.Minute, "timeout of zpool import (the kernel runs its own activity check)")
	return z
}

// hostID returns how the agent reads its hostid: the --hostid flag (refused when it
// differs from the kernel's, see mmp.CheckHostIDMatchesKernel) or mmp.SystemHostID,
// read again at every grant.
func (z *zpoolAgentFlags) hostID() (func() uint32, error) {
	if z.hostid == "" {
		return mmp.SystemHostID, nil
	}
	h, err := parseHostID(z.hostid)
	if err != nil {
		return nil, err
	}
	if err := mmp.CheckHostIDMatchesKernel(h, z.splHostIDPath); err != nil {
		return nil, cairn.InvalidField("hostid", "%v", err)
	}
	return func() uint32 { return h }, nil
}

// wire builds the zpool reconciler and puts it in front of opts.Reconciler: zpool
// subjects go to it, every other kind to the previous reconciler. The returned function
// stops it (imported pools stay imported).
func (z *zpoolAgentFlags) wire(nc *nats.Conn, opts *agents.Options, hostid func() uint32) (func(), error) {
	log := opts.Log.With().Str("component", "zpool").Logger()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	r, err := zpoolagent.New(zpoolagent.Options{
		Node: opts.Node, Names: opts.Names,
		Zpool:      zpoolagent.Zpool{Bin: z.bin, Exec: execx.New(log), ImportTimeout: z.importTimeout},
		Publisher:  zpoolagent.JetStreamPublisher(js),
		HostID:     hostid,
		Checker:    mmp.Checker{Tunables: mmp.Tunables{Interval: z.interval, ImportIntervals: z.importIntervals}},
		WatchEvery: z.watchEvery,
		RetryAfter: z.retry,
		StateDir:   z.stateDir,
		Log:        log,
	})
	if err != nil {
		return nil, err
	}
	opts.Reconciler = agents.Mux{Names: opts.Names, Kinds: map[string]agents.Reconciler{zpoolagent.Kind: r}, Default: opts.Reconciler}
	return func() { _ = r.Close() }, nil
}
