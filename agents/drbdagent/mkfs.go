package drbdagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/drbd"
)

// filesystemMaker is a Kernel that makes filesystems on a resource's volumes (Real,
// Sim): LINSTOR's FileSystem/Type.
type filesystemMaker interface {
	// MakeFilesystem makes o's filesystem on volume o.Volume of the resource (up, its
	// local disk UpToDate) through DRBD, so every connected disk gets it. A volume that
	// already carries a signature of o.Type is left as it is (made before: a reconcile
	// cut short after the mkfs); any other signature is an error and nothing is written
	// (Cairn never makes a filesystem over data).
	MakeFilesystem(ctx context.Context, r Resource, o drbd.FilesystemOrder) error
}

// mkfsArgv is the mkfs call for o on target (a device, or an image file of the
// volume's size): no discard (the blocks are on a replicated device), the owner of the
// root directory for ext4 (FileSystem/User and Group, names resolved on this host),
// MkfsParams split on white space after Cairn's own flags, so they win.
func mkfsArgv(o drbd.FilesystemOrder, target string) ([]string, error) {
	params := strings.Fields(o.Params)
	switch o.Type {
	case drbd.FilesystemExt4:
		ext := "nodiscard"
		if o.User != "" || o.Group != "" {
			uid, gid, err := owner(o.User, o.Group)
			if err != nil {
				return nil, err
			}
			ext += fmt.Sprintf(",root_owner=%d:%d", uid, gid)
		}
		return append(append([]string{"mkfs.ext4", "-q", "-F", "-E", ext}, params...), target), nil
	case drbd.FilesystemXFS:
		if o.User != "" || o.Group != "" {
			return nil, errors.New("FileSystem/User and FileSystem/Group: Cairn sets the root directory's owner on ext4 only (mkfs.xfs has no option for it)")
		}
		return append(append([]string{"mkfs.xfs", "-q", "-f", "-K"}, params...), target), nil
	}
	return nil, fmt.Errorf("FileSystem/Type %q: Cairn makes ext4 or xfs", o.Type)
}

// owner resolves a user and group (names or numbers; "" is 0, or the user's group).
func owner(userName, groupName string) (uid, gid int, err error) {
	if userName != "" {
		if uid, err = strconv.Atoi(userName); err != nil {
			u, lerr := user.Lookup(userName)
			if lerr != nil {
				return 0, 0, fmt.Errorf("FileSystem/User %s: %w", userName, lerr)
			}
			uid, _ = strconv.Atoi(u.Uid)
			if groupName == "" {
				gid, _ = strconv.Atoi(u.Gid)
			}
		}
	}
	if groupName != "" {
		if gid, err = strconv.Atoi(groupName); err != nil {
			g, lerr := user.LookupGroup(groupName)
			if lerr != nil {
				return 0, 0, fmt.Errorf("FileSystem/Group %s: %w", groupName, lerr)
			}
			gid, _ = strconv.Atoi(g.Gid)
		}
	}
	return uid, gid, nil
}

// probeSignature is the type of the signature blkid finds in the first sizeBytes of
// target ("" for none; a DRBD backing file's metadata at its end is not looked at).
func probeSignature(ctx context.Context, ex execx.Executor, target string, sizeBytes uint64) (string, error) {
	out, err := ex.Run(ctx, []string{"blkid", "-p", "-o", "value", "-s", "TYPE", "--size", strconv.FormatUint(sizeBytes, 10), target}, execx.Options{})
	if execx.ExitCode(err) == 2 { // nothing found
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// checkSignature decides from a volume's signature whether to make o's filesystem:
// none, make it; o.Type, it is made already; anything else, refuse.
func checkSignature(sig string, o drbd.FilesystemOrder) (make bool, err error) {
	switch sig {
	case "":
		return true, nil
	case o.Type:
		return false, nil
	}
	return false, fmt.Errorf("volume %d carries a %s signature: Cairn never makes a filesystem (%s) over data", o.Volume, sig, o.Type)
}

// mkfsImage makes o's filesystem in a new sparse image file of sizeKiB in dir and
// returns its path (the caller removes it).
func mkfsImage(ctx context.Context, ex execx.Executor, dir string, o drbd.FilesystemOrder, sizeKiB uint64) (string, error) {
	f, err := os.CreateTemp(dir, ".mkfs-*.img")
	if err != nil {
		return "", err
	}
	path := f.Name()
	err = f.Truncate(int64(sizeKiB) * 1024)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		var argv []string
		if argv, err = mkfsArgv(o, path); err == nil {
			_, err = ex.Run(ctx, argv, execx.Options{})
		}
	}
	if err != nil {
		_ = os.Remove(path)
		return "", err
	}
	return path, nil
}

// makeFilesystems carries out d's filesystem orders not yet done in this incarnation
// (st.FilesystemsMade), each once its local disk is UpToDate; until then it fails
// saying so, and the reconcile is tried again.
func (r *Reconciler) makeFilesystems(ctx context.Context, rd string, d *drbd.Desired, st *State) error {
	maker, ok := r.cfg.Kernel.(filesystemMaker)
	if !ok {
		return errors.New("this DRBD kernel cannot make filesystems")
	}
	for _, o := range d.Local.Filesystems {
		if _, done := st.FilesystemsMade[o.Volume]; done {
			continue
		}
		if ds := r.fold.DiskState(rd, o.Volume); ds != "UpToDate" {
			return fmt.Errorf("the %s filesystem of volume %d waits for the disk to be UpToDate (it is %q)", o.Type, o.Volume, ds)
		}
		if err := maker.MakeFilesystem(ctx, Resource{Desired: *d, Disks: st.Disks}, o); err != nil {
			return fmt.Errorf("make the %s filesystem of volume %d: %w", o.Type, o.Volume, err)
		}
		if st.FilesystemsMade == nil {
			st.FilesystemsMade = map[int]string{}
		}
		st.FilesystemsMade[o.Volume] = o.Type
		if err := SaveState(r.cfg.Paths.StateFile(rd), st); err != nil {
			return err
		}
		metricSteps.WithLabelValues("mkfs").Inc()
		r.cfg.Log.Info().Str("resource", rd).Int("volume", o.Volume).Str("type", o.Type).Msg("filesystem made")
	}
	return nil
}

// MakeFilesystem (Real): Primary for the time of mkfs on the DRBD device, then
// Secondary again.
func (k *Real) MakeFilesystem(ctx context.Context, r Resource, o drbd.FilesystemOrder) error {
	d := r.Desired
	minor, ok := localMinors(&d)[o.Volume]
	if !ok {
		return fmt.Errorf("no minor for volume %d", o.Volume)
	}
	dev := fmt.Sprintf("/dev/drbd%d", minor)
	var sizeKiB uint64
	for _, v := range d.Volumes {
		if v.Number == o.Volume {
			sizeKiB = v.SizeKiB
		}
	}
	setup := k.Drbdsetup
	if setup == "" {
		setup = "drbdsetup"
	}
	if _, err := k.Exec.Run(ctx, []string{setup, "primary", d.Resource}, execx.Options{}); err != nil {
		return err
	}
	defer func() {
		_, _ = k.Exec.Run(context.WithoutCancel(ctx), []string{setup, "secondary", d.Resource}, execx.Options{})
	}()
	sig, err := probeSignature(ctx, k.Exec, dev, sizeKiB*1024)
	if err != nil {
		return err
	}
	if mk, err := checkSignature(sig, o); err != nil || !mk {
		return err
	}
	argv, err := mkfsArgv(o, dev)
	if err != nil {
		return err
	}
	_, err = k.Exec.Run(ctx, argv, execx.Options{})
	return err
}

// simMkfsSuspendedWait bounds how long the sim's mkfs waits for suspended I/O.
var simMkfsSuspendedWait = 5 * time.Second

// MakeFilesystem (Sim): the filesystem is made in an image of the volume's size and
// written through the simulated device (simWriteWith: this disk and every connected
// diskful peer, the UUIDs rotated as for any write), its data blocks only.
func (s *Sim) MakeFilesystem(ctx context.Context, r Resource, o drbd.FilesystemOrder) error {
	d := r.Desired
	disk := r.Disks[o.Volume]
	var sizeKiB uint64
	for _, v := range d.Volumes {
		if v.Number == o.Volume {
			sizeKiB = v.SizeKiB
		}
	}
	if disk == "" || sizeKiB == 0 {
		return fmt.Errorf("sim: no disk for volume %d", o.Volume)
	}
	sig, err := probeSignature(ctx, s.Exec, disk, sizeKiB*1024)
	if err != nil {
		return err
	}
	if mk, err := checkSignature(sig, o); err != nil || !mk {
		return err
	}
	img, err := mkfsImage(ctx, s.Exec, filepath.Dir(disk), o, sizeKiB)
	if err != nil {
		return err
	}
	defer os.Remove(img)
	// A snapshot may hold this node's I/O suspended, and only a later reconcile of the
	// resource resumes it (or takes the copy): the write waits a bounded while, then
	// the reconcile fails and is tried again, never waiting on itself.
	wctx, cancel := context.WithTimeout(ctx, simMkfsSuspendedWait)
	defer cancel()
	_, err = simWriteWith(wctx, s.Exec, s.Dir, s.Root, d.Resource, o.Volume, func(group []*simReg, v int) (uint64, error) {
		return copyImage(img, group, v)
	})
	if err == nil {
		s.refresh(d.Resource)
	}
	return err
}

// copyImage writes the data blocks of image (its holes are zeros the disks hold
// already: fresh volumes) to volume v of every disk of group; returns the 4 KiB blocks
// written.
func copyImage(image string, group []*simReg, v int) (uint64, error) {
	var paths []string
	for _, n := range group {
		if nv := n.Volumes[v]; nv != nil && nv.Disk != "" {
			paths = append(paths, nv.Disk)
		}
	}
	f, err := os.Open(image)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	end := fi.Size()
	buf := make([]byte, dataChunk)
	var blocks uint64
	for pos := int64(0); pos < end; {
		next := nextData(f, pos, end)
		if next >= end {
			break
		}
		start := next &^ (dataChunk - 1)
		size := min(int64(dataChunk), end-start)
		if err := readFull(f, buf[:size], start); err != nil {
			return 0, err
		}
		if err := writeData(paths, start, buf[:size]); err != nil {
			return 0, err
		}
		blocks += uint64(size) / 4096
		pos = start + size
	}
	return blocks, nil
}
