// Package volume creates and removes the backing block devices of DRBD replicas: one
// Provider per backing.Provider value (lvm, lvm_thin, zfs, zfs_thin, file, file_thin),
// chosen by For from a replica's drbd.Local (Provider, Pool).
//
// A backing volume is named after the resource and the volume number, see Name:
// volume 0 of resource pvc-1 is "pvc-1_00000" (the LV pvc-1_00000 in the volume group,
// the zvol <pool>/pvc-1_00000, the file <dir>/pvc-1_00000.img).
//
// LVM and ZFS run lvcreate/lvs/lvremove and zfs through an execx.Executor; they need a
// kernel with a real volume group or pool, so their tests use execx.Recorder and
// assert the exact commands. The file providers are plain files and are tested for real;
// Loop puts a loop device over an image file for DRBD (losetup, real where allowed).
package volume

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/storage/backing"
)

// Provider creates, finds and removes backing volumes in one storage pool.
//
// Implementations are idempotent: Create of a volume that exists with a fitting size
// returns it unchanged, Remove of a volume that does not exist succeeds. A volume is
// never resized or replaced behind the caller's back.
type Provider interface {
	// Create makes volume name of at least sizeKiB KiB and returns its device path
	// (Path(name)). The device may be larger than asked: LVM rounds up to the volume
	// group's extent size, zvols to a multiple of ZFSGranuleKiB; files are exact.
	// Callers size for DRBD's internal metadata themselves.
	//
	// If the volume exists with a size that does not fit sizeKiB (smaller, or larger
	// than the rounding explains), or of another kind (a thick LV where a thin one is
	// wanted), Create returns an error wrapping ErrMismatch and changes nothing.
	// Returns an error for an invalid name or a zero size, and the tool's error
	// (an *execx.Error for LVM and ZFS) if creating fails.
	Create(ctx context.Context, name string, sizeKiB uint64) (devicePath string, err error)
	// Remove deletes volume name and its data. A volume that does not exist is not an
	// error. Returns the tool's error if removing fails (an open zvol, an LV in use).
	Remove(ctx context.Context, name string) error
	// Path is the device path volume name has (or would have); it does not check.
	Path(name string) string
	// Exists reports whether volume name exists. An error means the pool itself could
	// not be read (missing volume group or zpool, tool failed).
	Exists(ctx context.Context, name string) (bool, error)
	// Grow makes volume name at least sizeKiB KiB (rounded as Create rounds) and keeps
	// its data: lvextend, zfs set volsize, a longer file. A volume already that large
	// is left as it is (idempotent, so a grow cut short by a crash is simply repeated).
	// Never shrinks. Returns an error wrapping ErrNotFound when the volume does not
	// exist, and the tool's error if growing fails (no free extents, quota).
	Grow(ctx context.Context, name string, sizeKiB uint64) error
}

// ErrNotFound is wrapped by Grow's error when the volume does not exist.
var ErrNotFound = errors.New("volume does not exist")

// ErrMismatch is wrapped by Create's error when a volume of that name already exists
// but does not fit the request (size or kind). Resolve it by hand; Cairn never
// resizes or replaces a volume on its own.
var ErrMismatch = errors.New("existing volume does not fit")

// DefaultFileDir is the directory of the file providers when Local.Pool is empty; a
// relative Local.Pool names a directory under FileBaseDir.
const (
	FileBaseDir    = "/var/lib/cairn"
	DefaultFileDir = FileBaseDir + "/volumes"
)

// nameRE is what every provider accepts as a volume name: LVM LV names and ZFS
// dataset components both allow these characters, and no path separator or "..".
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// checkName refuses names that are not safe as an LV name, a dataset component and a
// file name.
func checkName(name string) error {
	if !nameRE.MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("volume name %q: must be 1-128 letters, digits, '_', '.' or '-', start with a letter or digit, without '..'", name)
	}
	return nil
}

func checkCreate(name string, sizeKiB uint64) error {
	if err := checkName(name); err != nil {
		return err
	}
	if sizeKiB == 0 {
		return fmt.Errorf("volume %s: size_kib must be > 0", name)
	}
	return nil
}

// For returns the Provider of a replica's drbd.Local: provider is Local.Provider, pool
// is Local.Pool, root prefixes every path the file providers use ("" or "/" on a real
// host; a per-node directory when several simulated nodes share one machine), and exec
// runs lvcreate, lvs, lvremove and zfs.
//
// Pool means, per provider:
//   - file, file_thin: the directory of the image files. Absolute: that directory;
//     relative: a directory under FileBaseDir; empty: DefaultFileDir. Under root either way.
//   - lvm: the volume group ("vg0").
//   - lvm_thin: the volume group and thin pool ("vg0/thinpool").
//   - zfs, zfs_thin: the zpool or a dataset in it under which the zvols live ("tank",
//     "tank/cairn").
//
// Returns an error naming local.provider for an empty or unknown provider, naming
// local.pool for a pool the provider cannot use, and an error if an LVM or ZFS
// provider gets no executor.
func For(provider backing.Provider, pool, root string, exec execx.Executor) (Provider, error) {
	switch provider {
	case backing.ProviderFile, backing.ProviderFileThin:
		dir, err := fileDir(pool, root, provider)
		if err != nil {
			return nil, err
		}
		return &File{Dir: dir, Thin: provider == backing.ProviderFileThin}, nil
	case backing.ProviderLVM, backing.ProviderLVMThin, backing.ProviderZFS, backing.ProviderZFSThin:
		if exec == nil {
			return nil, fmt.Errorf("volume: provider %s needs an executor to run its tools", provider)
		}
	case "":
		return nil, fmt.Errorf("local.provider: empty; must be one of %s", providerList())
	default:
		return nil, fmt.Errorf("local.provider %q: unknown; must be one of %s", provider, providerList())
	}
	switch provider {
	case backing.ProviderLVM:
		if !lvmNameRE.MatchString(pool) {
			return nil, fmt.Errorf("local.pool %q: provider lvm needs a volume group name (letters, digits, '+', '_', '.', '-'; not starting with '-')", pool)
		}
		return &LVM{VG: pool, Exec: exec}, nil
	case backing.ProviderLVMThin:
		vg, tp, ok := strings.Cut(pool, "/")
		if !ok || !lvmNameRE.MatchString(vg) || !lvmNameRE.MatchString(tp) {
			return nil, fmt.Errorf("local.pool %q: provider lvm_thin needs VG/THINPOOL (e.g. vg0/thinpool)", pool)
		}
		return &LVM{VG: vg, ThinPool: tp, Exec: exec}, nil
	default: // zfs, zfs_thin
		if !zfsParentRE.MatchString(pool) || strings.Contains(pool, "//") || strings.HasSuffix(pool, "/") {
			return nil, fmt.Errorf("local.pool %q: provider %s needs a zpool or dataset name (tank, tank/cairn)", pool, provider)
		}
		return &ZFS{Parent: pool, Thin: provider == backing.ProviderZFSThin, Exec: exec}, nil
	}
}

var (
	lvmNameRE   = regexp.MustCompile(`^[A-Za-z0-9+_.][A-Za-z0-9+_.-]{0,126}$`)
	zfsParentRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.:-]*(/[A-Za-z0-9_.:-]+)*$`)
)

func fileDir(pool, root string, provider backing.Provider) (string, error) {
	dir := pool
	switch {
	case pool == "":
		dir = DefaultFileDir
	case !filepath.IsAbs(pool):
		dir = filepath.Join(FileBaseDir, pool)
	}
	for _, el := range strings.Split(pool, "/") {
		if el == ".." {
			return "", fmt.Errorf("local.pool %q: provider %s needs a directory without '..'", pool, provider)
		}
	}
	if root != "" {
		dir = filepath.Join(root, dir)
	}
	return filepath.Clean(dir), nil
}

func providerList() string {
	s := make([]string, len(backing.Providers))
	for i, p := range backing.Providers {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// fits reports whether a volume of have bytes satisfies a request of want bytes on a
// back end that rounds sizes up to a multiple of granule bytes.
func fits(have, want, granule uint64) bool {
	if granule == 0 {
		granule = 1
	}
	return have >= want && have <= (want+granule-1)/granule*granule
}

func mismatch(name string, haveBytes, wantKiB uint64, kind string) error {
	return fmt.Errorf("volume %s: exists with %d KiB%s, want %d KiB: %w (resize or remove it by hand)", name, haveBytes/1024, kind, wantKiB, ErrMismatch)
}

// DevicePath is the device path volume name would have under provider and pool (root as
// in For), computed without touching the host: what `cairn drbd render` shows an
// operator. Errors as For's.
func DevicePath(provider backing.Provider, pool, root, name string) (string, error) {
	p, err := For(provider, pool, root, pathOnly{})
	if err != nil {
		return "", err
	}
	return p.Path(name), nil
}

// pathOnly is the executor of a provider used only for Path: it runs nothing.
type pathOnly struct{}

func (pathOnly) Run(context.Context, []string, execx.Options) ([]byte, error) {
	return nil, fmt.Errorf("volume: a provider made by DevicePath runs nothing")
}
