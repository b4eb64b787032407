package zpoolagent

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
)

// Zpool drives zpool(8) through an Executor: the real binary on hosts (execx.Runner);
// in tests a fake (zpoolfake), since zpool needs the ZFS kernel module (/dev/zfs).
type Zpool struct {
	// Bin is the zpool program ("zpool": looked up in PATH).
	Bin  string
	Exec execx.Executor
	// ImportTimeout bounds zpool import (the kernel's own activity check of a multihost
	// pool takes 20-25 s with the defaults); ExportTimeout bounds zpool export, with or
	// without -f; ListTimeout bounds zpool list. Zero: 5 min, 2 min, 30 s.
	ImportTimeout, ExportTimeout, ListTimeout time.Duration
}

func (z Zpool) bin() string {
	if z.Bin == "" {
		return "zpool"
	}
	return z.Bin
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// ImportArgv is the zpool import command for pool on devices:
//
//	zpool import -d DEV... -N -o cachefile=none [-f] POOL
//
// -d per leaf: zpool looks at these devices only (no scan of /dev, no stray copy of the
// pool on another LUN); -N: no dataset is mounted (the layers above decide that);
// -o cachefile=none: the pool is never written to zpool.cache, so a reboot never
// imports it again without a grant and a check; -f only when PlanImport says so.
func ImportArgv(bin, pool string, devices []string, force bool) []string {
	argv := []string{bin, "import"}
	for _, d := range devices {
		argv = append(argv, "-d", d)
	}
	argv = append(argv, "-N", "-o", "cachefile=none")
	if force {
		argv = append(argv, "-f")
	}
	return append(argv, pool)
}

// Import runs ImportArgv. The error is the executor's (*execx.Error with zpool's
// stderr); ClassifyImport maps it to a status.
func (z Zpool) Import(ctx context.Context, pool string, devices []string, force bool) error {
	_, err := z.Exec.Run(ctx, ImportArgv(z.bin(), pool, devices, force), execx.Options{Timeout: orDefault(z.ImportTimeout, 5*time.Minute)})
	return err
}

// Export runs zpool export POOL. zpool refuses a busy pool (open zvols, mounted
// datasets): the caller reports it and retries. It is never forced: a pool kept imported
// here keeps writing MMP, so no other host's check passes.
func (z Zpool) Export(ctx context.Context, pool string) error {
	return z.export(ctx, []string{z.bin(), "export", pool})
}

func (z Zpool) export(ctx context.Context, argv []string) error {
	_, err := z.Exec.Run(ctx, argv, execx.Options{Timeout: orDefault(z.ExportTimeout, 2*time.Minute)})
	return err
}

// FenceArgv is the fence: zpool export -F POOL. -F (hard force, which implies -f) exports
// without rewriting the labels: they keep state ACTIVE and this host's hostid. A plain
// or -f export writes EXPORTED and this host's hostid into every label of a pool that
// another host is now writing: that host's watcher would see a label rewritten with a
// foreign hostid and fence the rightful owner, and the next check here would be skipped
// as "exported by this host". With -F the next import here runs the full activity check
// (a pool left ACTIVE needs one, in the kernel too).
func FenceArgv(bin, pool string) []string { return []string{bin, "export", "-F", pool} }

// Fence runs FenceArgv.
func (z Zpool) Fence(ctx context.Context, pool string) error {
	return z.export(ctx, FenceArgv(z.bin(), pool))
}

// IsNoSuchPool reports whether a zpool error says the pool is not imported
// ("cannot open 'P': no such pool").
func IsNoSuchPool(err error) bool {
	if err == nil {
		return false
	}
	var xe *execx.Error
	return errors.As(err, &xe) && xe.ExitCode == 1 && strings.Contains(xe.Stderr, "no such pool")
}

// Imported reports whether pool is imported on this host: zpool list -H -o name POOL
// prints the name (exit 0) or says "no such pool" (exit 1). Any other failure is an
// error: the state is unknown.
func (z Zpool) Imported(ctx context.Context, pool string) (bool, error) {
	out, err := z.Exec.Run(ctx, []string{z.bin(), "list", "-H", "-o", "name", pool}, execx.Options{Timeout: orDefault(z.ListTimeout, 30*time.Second)})
	if err != nil {
		if IsNoSuchPool(err) {
			return false, nil
		}
		return false, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) == pool {
			return true, nil
		}
	}
	return false, nil
}

// Health is a pool's health as zpool reports it.
type Health struct {
	// State is zpool list's health column: ONLINE, DEGRADED, FAULTED, SUSPENDED, ...
	State string
	// Suspended is CodeMMPSuspended (zpool status names ZFS-8000-MM: the MMP thread
	// could not land a write within fail intervals × interval) or CodeIOSuspended when
	// State is SUSPENDED; "" otherwise.
	Suspended string
	// Status is zpool status's output when suspended (for the report).
	Status string
}

// Health runs zpool list -H -o health POOL, and zpool status POOL when it says
// SUSPENDED, to tell an MMP suspension from an I/O one. It never runs zpool clear.
func (z Zpool) Health(ctx context.Context, pool string) (Health, error) {
	opts := execx.Options{Timeout: orDefault(z.ListTimeout, 30*time.Second)}
	out, err := z.Exec.Run(ctx, []string{z.bin(), "list", "-H", "-o", "health", pool}, opts)
	if err != nil {
		return Health{}, err
	}
	h := Health{State: strings.TrimSpace(string(out))}
	if h.State != "SUSPENDED" {
		return h, nil
	}
	h.Suspended = CodeIOSuspended
	st, err := z.Exec.Run(ctx, []string{z.bin(), "status", pool}, opts)
	if err != nil {
		return h, nil // suspended all the same; the kind stays io
	}
	h.Status = strings.TrimSpace(string(st))
	if strings.Contains(h.Status, "ZFS-8000-MM") || strings.Contains(h.Status, "multihost writes failed") {
		h.Suspended = CodeMMPSuspended
	}
	return h, nil
}
