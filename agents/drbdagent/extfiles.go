package drbdagent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-io/cairn/agents/fsx"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
)

// extFiles writes the external files the resources on this node deploy
// (drbd.Desired.Files) and removes a file once no resource lists it any more. It writes
// only under the allowed path prefixes (the agent's --allow-ext-files; none by default,
// as LINSTOR's satellite), so the control plane cannot write just anywhere on a host.
//
// What it wrote is recorded in <StateDir>/ext-files.json (path -> digest and the
// resources listing it), written atomically after every change: a file undeployed, or a
// resource removed, while the agent was down is removed when its desired state comes
// again after the restart.
type extFiles struct {
	root    string
	allowed []string
	record  string

	// publish sends the report of what is on disk after every change (nil: none).
	publish func(events.FilesReport)

	mu     sync.Mutex
	loaded bool
	files  map[string]*fileRecord
}

// fileRecord is one file the agent wrote: its digest and the resources listing it.
type fileRecord struct {
	SHA256    string   `json:"sha256"`
	Resources []string `json:"resources"`
}

func newExtFiles(p Paths, allowed []string) *extFiles {
	return &extFiles{root: p.Root, allowed: AllowedPrefixes(allowed), record: filepath.Join(p.StateDir, "ext-files.json")}
}

// AllowedPrefixes cleans the --allow-ext-files prefixes (empty ones dropped).
func AllowedPrefixes(allowed []string) []string {
	var clean []string
	for _, a := range allowed {
		if a = strings.TrimSpace(a); a != "" {
			clean = append(clean, path.Clean("/"+a))
		}
	}
	return clean
}

// sync makes the files of resource rd on this host what want says: each written (when
// its content on disk differs) unless outside the allowed paths, and every file rd listed
// before but not now removed when no other resource lists it. A file it may not write
// is an error naming the path and the setting; the others are carried out all the same.
func (x *extFiles) sync(rd string, want []drbd.File) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.load(); err != nil {
		return err
	}
	var errs []error
	changed := false
	wanted := map[string]bool{}
	for _, f := range want {
		wanted[f.Path] = true
		if !events.PathAllowed(x.allowed, f.Path) || path.Clean(f.Path) != f.Path {
			errs = append(errs, fmt.Errorf("external file %s: outside this agent's allowed paths %v (start it with --allow-ext-files %s to allow it)",
				f.Path, x.allowed, path.Dir(f.Path)))
			continue
		}
		if err := x.write(f); err != nil {
			errs = append(errs, err)
			continue
		}
		rec := x.files[f.Path]
		if rec == nil {
			rec = &fileRecord{}
			x.files[f.Path] = rec
		}
		if !slices.Contains(rec.Resources, rd) || rec.SHA256 != f.SHA256 {
			rec.SHA256 = f.SHA256
			if !slices.Contains(rec.Resources, rd) {
				rec.Resources = append(rec.Resources, rd)
				slices.Sort(rec.Resources)
			}
			changed = true
		}
	}
	for p, rec := range x.files {
		if wanted[p] || !slices.Contains(rec.Resources, rd) {
			continue
		}
		rec.Resources = slices.DeleteFunc(rec.Resources, func(r string) bool { return r == rd })
		changed = true
		if len(rec.Resources) > 0 {
			continue
		}
		if err := os.Remove(x.hostPath(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("external file %s: %w", p, err))
			rec.Resources = []string{rd} // removed by a later reconcile
			continue
		}
		delete(x.files, p)
	}
	if changed {
		if err := x.save(); err != nil {
			errs = append(errs, err)
		}
		x.report()
	}
	return errors.Join(errs...)
}

// report publishes what is on disk of every file the agent wrote (x.mu held).
func (x *extFiles) report() {
	if x.publish == nil {
		return
	}
	rep := events.FilesReport{At: time.Now().UTC(), Files: map[string]string{}}
	for p := range x.files {
		if b, err := os.ReadFile(x.hostPath(p)); err == nil {
			sum := sha256.Sum256(b)
			rep.Files[p] = hex.EncodeToString(sum[:])
		} else {
			rep.Files[p] = ""
		}
	}
	x.publish(rep)
}

func (x *extFiles) hostPath(p string) string { return filepath.Join(x.root, filepath.FromSlash(p)) }

// write writes f unless the host already holds exactly its content.
func (x *extFiles) write(f drbd.File) error {
	sum := sha256.Sum256(f.Content)
	if f.SHA256 != "" && hex.EncodeToString(sum[:]) != f.SHA256 {
		return fmt.Errorf("external file %s: content does not match its digest %s", f.Path, f.SHA256)
	}
	host := x.hostPath(f.Path)
	if cur, err := os.ReadFile(host); err == nil && bytes.Equal(cur, f.Content) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		return fmt.Errorf("external file %s: %w", f.Path, err)
	}
	if err := fsx.WriteAtomic(host, f.Content, 0o644); err != nil {
		return fmt.Errorf("external file %s: %w", f.Path, err)
	}
	return nil
}

func (x *extFiles) load() error {
	if x.loaded {
		return nil
	}
	x.files = map[string]*fileRecord{}
	raw, err := os.ReadFile(x.record)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("external files record: %w", err)
	default:
		if err := json.Unmarshal(raw, &x.files); err != nil {
			return fmt.Errorf("external files record %s: %w", x.record, err)
		}
	}
	x.loaded = true
	return nil
}

func (x *extFiles) save() error {
	raw, err := json.Marshal(x.files)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(x.record), 0o755); err != nil {
		return err
	}
	return fsx.WriteAtomic(x.record, raw, 0o644)
}
