// Package zpoolfake is a FAKE zpool(8) for tests. The real zpool needs the ZFS kernel
// module (/dev/zfs), which test machines and CI do not have, so the agent's tests drive
// this instead, in process (Fake implements execx.Executor) or as a program
// (zpoolfake/zpool, built by the tests and passed to cairn agent --zpool-bin).
//
// It keeps the import state of "this host" in a JSON state file (one per host), and it
// works on real leaf vdev images (the OpenZFS fixtures of storage/zfs/testdata) the way
// zpool would leave them: import rewrites every label's config with this host's hostid
// and hostname and state ACTIVE and writes a newer uberblock (the import's txg sync);
// export writes state EXPORTED and a newer uberblock. So a pool this host exported is
// "exported by this host" for the next activity check, and the watcher sees labels
// naming this host after an import, as with the real zpool.
//
// It emulates zpool's refusals that do not need the kernel: a pool last used by another
// hostid and not exported is refused without -f ("previously in use from another
// system"); a multihost pool with hostid 0 is refused (ZFS-8000-EY); an already imported
// name, no such pool. It does NOT run the kernel's activity check (that is the agent's
// check, tested on its own) and runs no MMP thread: an imported pool is quiet. Refusals
// that need a live second host can be scripted (FailImport).
//
// Supported: zpool import -d DEV|DIR... [-N] [-o k=v]... [-f] POOL; zpool export [-f|-F]
// POOL (-F, hard force, does not rewrite the labels); zpool list -H -o name[,health]
// [POOL]; zpool status POOL (the head only). Suspension (MMP or I/O) is set with Suspend. Byte order: the leaves' own.
package zpoolfake

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/storage/mmp"
	"github.com/cairn-io/cairn/storage/zfs"
	"github.com/cairn-io/cairn/storage/zfs/zfsimage"
)

// Fake is one host's zpool. The zero value is not usable: set StateFile.
type Fake struct {
	// StateFile holds the pools imported on this host (created when missing).
	StateFile string
	// HostID and Hostname are this host's (written into the labels on import).
	HostID   uint32
	Hostname string
	// FailImport, when not empty, makes every import fail with exit 1 and this text on
	// stderr (a refusal that needs a second live host, e.g. "cannot import 'tank': pool
	// is imported on host-b (hostid: 0x22222222)"), without touching anything.
	FailImport string
	// FailExport likewise for export without -f ("cannot export 'tank': pool is busy").
	FailExport string
	// Now is the clock for uberblock timestamps (nil: time.Now).
	Now func() time.Time

	mu    sync.Mutex
	calls []string
}

var _ execx.Executor = (*Fake)(nil)

// SetFail sets FailImport and FailExport while the fake may be in use.
func (f *Fake) SetFail(importStderr, exportStderr string) {
	f.mu.Lock()
	f.FailImport, f.FailExport = importStderr, exportStderr
	f.mu.Unlock()
}

// Calls returns the calls made in process (argv without argv[0], joined by spaces).
func (f *Fake) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Run implements execx.Executor: argv[0] is ignored; a non-zero exit is an *execx.Error
// with the stderr, as the Runner reports it.
func (f *Fake) Run(ctx context.Context, argv []string, opts execx.Options) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("execx: argv is empty")
	}
	f.mu.Lock()
	f.calls = append(f.calls, strings.Join(argv[1:], " "))
	f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, &execx.Error{Argv: argv, ExitCode: -1, Err: err}
	}
	var out, errb bytes.Buffer
	code := f.Main(argv[1:], &out, &errb)
	if code != 0 {
		return out.Bytes(), &execx.Error{Argv: slices.Clone(argv), ExitCode: code, Stderr: strings.TrimSpace(errb.String())}
	}
	return out.Bytes(), nil
}

type state struct {
	Imported map[string]imported `json:"imported"`
}

type imported struct {
	Devices []string  `json:"devices"`
	At      time.Time `json:"at"`
	// Suspended is "mmp" (the MMP thread could not land a write in time, ZFS-8000-MM),
	// "io" (I/O failures with failmode=wait) or "" (not suspended). Set with Suspend.
	Suspended string `json:"suspended,omitempty"`
}

// Suspend marks pool, imported on the host of stateFile, suspended for reason ("mmp",
// "io") or resumed (""), as the kernel would after MMP writes failed or I/O failed (and
// zpool clear after it). Errors: no state file, pool not imported there.
func Suspend(stateFile, pool, reason string) error {
	f := &Fake{StateFile: stateFile}
	unlock, err := f.lock()
	if err != nil {
		return err
	}
	defer unlock()
	st, err := f.load()
	if err != nil {
		return err
	}
	im, ok := st.Imported[pool]
	if !ok {
		return fmt.Errorf("pool %s is not imported on %s", pool, stateFile)
	}
	im.Suspended = reason
	st.Imported[pool] = im
	return f.save(st)
}

// Main runs one zpool command (args without the program name) and returns its exit
// status: 0 ok, 1 refused or failed (zpool's own), 2 usage.
func (f *Fake) Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: zpool command args ...")
		return 2
	}
	f.mu.Lock()
	failImport, failExport := f.FailImport, f.FailExport
	f.mu.Unlock()
	unlock, err := f.lock()
	if err != nil {
		fmt.Fprintf(stderr, "fake zpool: %v\n", err)
		return 1
	}
	defer unlock()
	st, err := f.load()
	if err != nil {
		fmt.Fprintf(stderr, "fake zpool: %v\n", err)
		return 1
	}
	switch args[0] {
	case "list":
		return f.list(st, args[1:], stdout, stderr)
	case "import":
		return f.imp(st, args[1:], stderr, failImport)
	case "export":
		return f.export(st, args[1:], stderr, failExport)
	case "status":
		return f.status(st, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "fake zpool: unrecognized command '%s'\n", args[0])
	return 2
}

func (f *Fake) lock() (func(), error) {
	lf, err := os.OpenFile(f.StateFile+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		lf.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(lf.Fd()), syscall.LOCK_UN); lf.Close() }, nil
}

func (f *Fake) load() (*state, error) {
	st := &state{Imported: map[string]imported{}}
	b, err := os.ReadFile(f.StateFile)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, st); err != nil {
			return nil, fmt.Errorf("state file %s: %w", f.StateFile, err)
		}
	}
	if st.Imported == nil {
		st.Imported = map[string]imported{}
	}
	return st, nil
}

func (f *Fake) save(st *state) error {
	b, _ := json.Marshal(st)
	tmp := f.StateFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, f.StateFile)
}

func (f *Fake) list(st *state, args []string, stdout, stderr io.Writer) int {
	var pools []string
	cols := []string{"name"}
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-H":
		case a == "-o":
			i++
			if i >= len(args) {
				fmt.Fprintln(stderr, "missing argument for 'o' option")
				return 2
			}
			cols = strings.Split(args[i], ",")
			for _, c := range cols {
				if c != "name" && c != "health" {
					fmt.Fprintln(stderr, "fake zpool: list supports -o name,health only")
					return 2
				}
			}
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(stderr, "invalid option '%s'\n", a)
			return 2
		default:
			pools = append(pools, a)
		}
	}
	if len(pools) == 0 {
		for p := range st.Imported {
			pools = append(pools, p)
		}
		sort.Strings(pools)
	}
	code := 0
	for _, p := range pools {
		im, ok := st.Imported[p]
		if !ok {
			fmt.Fprintf(stderr, "cannot open '%s': no such pool\n", p)
			code = 1
			continue
		}
		var row []string
		for _, c := range cols {
			switch {
			case c == "name":
				row = append(row, p)
			case im.Suspended != "":
				row = append(row, "SUSPENDED")
			default:
				row = append(row, "ONLINE")
			}
		}
		fmt.Fprintln(stdout, strings.Join(row, "\t"))
	}
	return code
}

// status prints the head of zpool status POOL as the real one does for the states the
// fake knows: ONLINE, and SUSPENDED by MMP (ZFS-8000-MM) or by I/O failures.
func (f *Fake) status(st *state, args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "fake zpool: status POOL only")
		return 2
	}
	pool := args[0]
	im, ok := st.Imported[pool]
	if !ok {
		fmt.Fprintf(stderr, "cannot open '%s': no such pool\n", pool)
		return 1
	}
	switch im.Suspended {
	case "mmp":
		fmt.Fprintf(stdout, "  pool: %s\n state: SUSPENDED\nstatus: The pool is suspended because multihost writes failed or were\n\tdelayed; another system could import the pool undetected.\n"+
			"action: Make sure the pool's devices are connected, then reboot your system and\n\timport the pool.\n   see: https://openzfs.github.io/openzfs-docs/msg/ZFS-8000-MM\n", pool)
	case "io":
		fmt.Fprintf(stdout, "  pool: %s\n state: SUSPENDED\nstatus: One or more devices are faulted in response to IO failures.\n"+
			"action: Make sure the affected devices are connected, then run 'zpool clear'.\n   see: https://openzfs.github.io/openzfs-docs/msg/ZFS-8000-HC\n", pool)
	default:
		fmt.Fprintf(stdout, "  pool: %s\n state: ONLINE\nconfig:\n\n\tNAME        STATE     READ WRITE CKSUM\n\t%s  ONLINE       0     0     0\n\nerrors: No known data errors\n", pool, pool)
	}
	return 0
}

func (f *Fake) imp(st *state, args []string, stderr io.Writer, failImport string) int {
	var dirs []string
	force := false
	var pool string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "-d", "-o":
			i++
			if i >= len(args) {
				fmt.Fprintf(stderr, "missing argument for '%s' option\n", a)
				return 2
			}
			if a == "-d" {
				dirs = append(dirs, args[i])
			}
		case "-N":
		case "-f":
			force = true
		default:
			if strings.HasPrefix(a, "-") {
				fmt.Fprintf(stderr, "invalid option '%s'\n", a)
				return 2
			}
			if pool != "" {
				fmt.Fprintln(stderr, "fake zpool: one pool name only")
				return 2
			}
			pool = a
		}
	}
	if pool == "" || len(dirs) == 0 {
		fmt.Fprintln(stderr, "fake zpool: import needs -d DEV|DIR and a pool name (the fake does not scan /dev)")
		return 2
	}
	if failImport != "" {
		fmt.Fprintln(stderr, failImport)
		return 1
	}
	if _, ok := st.Imported[pool]; ok {
		fmt.Fprintf(stderr, "cannot import '%s': a pool with that name already exists\nuse the form 'zpool import <pool | id> <newpool>' to give it a new name\n", pool)
		return 1
	}
	leaves, best, err := findPool(dirs, pool)
	if err != nil {
		fmt.Fprintf(stderr, "fake zpool: %v\n", err)
		return 1
	}
	if len(leaves) == 0 || best.Config.State == zfs.StateDestroyed {
		fmt.Fprintf(stderr, "cannot import '%s': no such pool available\n", pool)
		return 1
	}
	ub := best.Slot.Uberblock
	multihost := ub.MMPValid() && ub.MMPDelay != 0
	cfg := best.Config
	if multihost && f.HostID == 0 {
		fmt.Fprintf(stderr, "cannot import '%s': pool has the multihost property on and the system's hostid is not set.\n"+
			"   see: https://openzfs.github.io/openzfs-docs/msg/ZFS-8000-EY\n", pool)
		return 1
	}
	if !force && cfg.State != zfs.StateExported && cfg.HasHostID && cfg.HostID != 0 && cfg.HostID != uint64(f.HostID) {
		fmt.Fprintf(stderr, "cannot import '%s': pool was previously in use from another system.\n"+
			"Last accessed by %s (hostid=%x) at %s\nThe pool can be imported, use 'zpool import -f' to import the pool.\n",
			pool, cfg.Hostname, cfg.HostID, time.Unix(int64(ub.Timestamp), 0).UTC().Format(time.ANSIC))
		return 1
	}
	if err := f.rewrite(leaves, best, zfs.StateActive, true); err != nil {
		fmt.Fprintf(stderr, "fake zpool: %v\n", err)
		return 1
	}
	var devs []string
	for _, l := range leaves {
		devs = append(devs, l.path)
	}
	st.Imported[pool] = imported{Devices: devs, At: f.now().UTC()}
	if err := f.save(st); err != nil {
		fmt.Fprintf(stderr, "fake zpool: %v\n", err)
		return 1
	}
	return 0
}

func (f *Fake) export(st *state, args []string, stderr io.Writer, failExport string) int {
	force, hard := false, false
	var pool string
	for _, a := range args {
		switch {
		case a == "-f":
			force = true
		case a == "-F":
			force, hard = true, true
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(stderr, "invalid option '%s'\n", a)
			return 2
		default:
			pool = a
		}
	}
	if pool == "" {
		fmt.Fprintln(stderr, "missing pool argument")
		return 2
	}
	im, ok := st.Imported[pool]
	if !ok {
		fmt.Fprintf(stderr, "cannot open '%s': no such pool\n", pool)
		return 1
	}
	if failExport != "" && !force {
		fmt.Fprintln(stderr, failExport)
		return 1
	}
	var err error
	if !hard { // -F (hard force) leaves the labels as they are: ACTIVE, this host's hostid
		var leaves []leaf
		var best zfs.Found
		leaves, best, err = findPool(im.Devices, pool)
		if err == nil && len(leaves) > 0 {
			err = f.rewrite(leaves, best, zfs.StateExported, false)
		}
	}
	if err != nil && !force {
		fmt.Fprintf(stderr, "fake zpool: %v\n", err)
		return 1
	}
	delete(st.Imported, pool)
	if err := f.save(st); err != nil {
		fmt.Fprintf(stderr, "fake zpool: %v\n", err)
		return 1
	}
	return 0
}

func (f *Fake) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

type leaf struct {
	path string
	lf   *zfs.Leaf
}

// findPool reads every file named (or in every directory named) and returns the leaves
// whose label names pool, and the best uberblock over them.
func findPool(paths []string, pool string) ([]leaf, zfs.Found, error) {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			continue // zpool ignores missing search paths
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		ents, _ := os.ReadDir(p)
		for _, e := range ents {
			if e.Type().IsRegular() {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	}
	var out []leaf
	var lfs []*zfs.Leaf
	for _, p := range files {
		lf, err := readLeaf(p)
		if err != nil {
			continue
		}
		c, _, ok := lf.Config(0)
		if !ok || c.PoolName != pool {
			continue
		}
		out = append(out, leaf{p, lf})
		lfs = append(lfs, lf)
	}
	if len(out) == 0 {
		return nil, zfs.Found{}, nil
	}
	best, ok := zfs.Best(lfs)
	if !ok {
		return nil, zfs.Found{}, fmt.Errorf("pool %s: no valid uberblock", pool)
	}
	return out, best, nil
}

// rewrite writes, on every leaf, every label's config with the new state and txg (and
// this host's hostid and hostname when claim), and a newer uberblock in the ring slot
// of the new txg of every label, as the txg sync of an import or export does.
func (f *Fake) rewrite(leaves []leaf, best zfs.Found, newState uint64, claim bool) error {
	txg := best.Slot.TXG + 1
	ub := best.Slot.Uberblock
	ub.TXG = txg
	ub.Timestamp = max(uint64(f.now().Unix()), best.Slot.Timestamp+1)
	for _, l := range leaves {
		fh, err := os.OpenFile(l.path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		order := leafOrder(l.lf)
		nslots := (128 << 10) / l.lf.SlotSize
		for _, lb := range l.lf.Labels {
			if lb.Config == nil {
				continue
			}
			nv := withPairs(lb.Config, newState, txg, claim, f.HostID, f.Hostname)
			if _, err := fh.WriteAt(zfsimage.ConfigArea(nv, lb.Offset, order), zfsimage.ConfigOffset(lb.Offset)); err != nil {
				fh.Close()
				return err
			}
			slot := int(txg % uint64(nslots-1)) // the last slot is MMP's
			off := zfsimage.SlotOffset(lb.Offset, slot, l.lf.SlotSize)
			if _, err := fh.WriteAt(zfsimage.UberblockSlot(ub, off, l.lf.SlotSize, order), off); err != nil {
				fh.Close()
				return err
			}
		}
		if err := fh.Sync(); err != nil {
			fh.Close()
			return err
		}
		if err := fh.Close(); err != nil {
			return err
		}
	}
	return nil
}

// withPairs returns a copy of a label config with state and txg set (and hostid and
// hostname when claim).
func withPairs(nv *zfs.NVList, state, txg uint64, claim bool, hostid uint32, hostname string) *zfs.NVList {
	out := &zfs.NVList{Pairs: slices.Clone(nv.Pairs)}
	setPair(out, "state", 8, state)
	setPair(out, "txg", 8, txg)
	if claim {
		setPair(out, "hostid", 8, uint64(hostid))
		setPair(out, "hostname", 9, hostname)
	}
	return out
}

// setPair sets the value of the pair name in nv, adding it with type typ when nv has
// none.
func setPair(nv *zfs.NVList, name string, typ int, v any) {
	if i := slices.IndexFunc(nv.Pairs, func(p zfs.NVPair) bool { return p.Name == name }); i >= 0 {
		nv.Pairs[i].Value = v
		return
	}
	nv.Pairs = append(nv.Pairs, zfs.NVPair{Name: name, Type: typ, Value: v})
}

// readLeaf reads the labels and uberblocks of the leaf file at path.
func readLeaf(path string) (*zfs.Leaf, error) {
	d, fh, err := zfs.OpenDevice(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return zfs.ReadLeaf(d)
}

// HostIDFromEnv parses a hostid for the program: hex text, else the system's.
func HostIDFromEnv(v string) (uint32, error) {
	if v == "" {
		return mmp.SystemHostID(), nil
	}
	return mmp.ParseHostID(v)
}

// Relabel rewrites pairs of every label config of each leaf file in place (resealed):
// uint64 values (state, txg, hostid, …) and strings (name, hostname). Tests use it to
// give a fixture pool another name, or to play another host that imported the pool
// (its hostid and hostname in the labels), as zpool import on that host would write.
func Relabel(paths []string, set map[string]any) error {
	for _, p := range paths {
		lf, err := readLeaf(p)
		if err != nil {
			return err
		}
		order := leafOrder(lf)
		w, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		for _, lb := range lf.Labels {
			if lb.Config == nil {
				continue
			}
			out := &zfs.NVList{Pairs: slices.Clone(lb.Config.Pairs)}
			for name, v := range set {
				typ := 8
				if _, ok := v.(string); ok {
					typ = 9
				}
				if u, ok := v.(uint32); ok {
					v = uint64(u)
				}
				setPair(out, name, typ, v)
			}
			if _, err := w.WriteAt(zfsimage.ConfigArea(out, lb.Offset, order), zfsimage.ConfigOffset(lb.Offset)); err != nil {
				w.Close()
				return err
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
	return nil
}

// WriteMMP writes an MMP uberblock into the MMP slot (the last of the ring) of label l
// of a leaf file: the best uberblock with the timestamp and the MMP sequence one up, as
// another host's MMP thread does. Tests use it to play a live writer.
func WriteMMP(path string, l int) error {
	lf, err := readLeaf(path)
	if err != nil {
		return err
	}
	best, ok := lf.Best()
	if !ok {
		return fmt.Errorf("%s: no valid uberblock", path)
	}
	ub := best.Uberblock
	ub.Timestamp++
	seq := ub.MMPSeq() + 1
	ub.MMPConfig = ub.MMPConfig&^(0xffff<<32) | (seq&0xffff)<<32 | zfs.MMPSeqValid
	nslots := (128 << 10) / lf.SlotSize
	off := zfsimage.SlotOffset(lf.Labels[l].Offset, nslots-1, lf.SlotSize)
	w, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if _, err := w.WriteAt(zfsimage.UberblockSlot(ub, off, lf.SlotSize, leafOrder(lf)), off); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

func leafOrder(lf *zfs.Leaf) binary.ByteOrder {
	for _, s := range lf.Slots {
		if s.Uberblock.ByteSwapped {
			return binary.BigEndian
		}
		break
	}
	return binary.LittleEndian
}
