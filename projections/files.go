package projections

import (
	"slices"
	"strings"

	"github.com/cairn-io/cairn/events"
)

// ExternalFile is one registered external file (LINSTOR's /v1/files): its content and
// the definitions that deploy it. Agents write it on every node holding a replica of
// one of them (drbd.Desired.Files).
type ExternalFile struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
	SHA256  string `json:"sha256"`
	// Resources are the definitions deploying it, by name.
	Resources []string `json:"resources,omitempty"`
	// Seq is the sequence of the event that last set its content.
	Seq uint64 `json:"seq"`
}

const filePrefix = "v/file/"

func fileKey(path string) string { return filePrefix + path }

// applyFile folds the external file events; handled is false for other types. A
// content change or a deletion changes the desired state of every definition that
// deploys the file (their Seq moves, their nodes get desired state again).
func applyFile(t *tx, ev events.Event) (handled bool, err error) {
	switch d := ev.Data.(type) {
	case *events.ExternalFileSet:
		var f ExternalFile
		if _, err := getJSON(t, fileKey(d.Path), &f); err != nil {
			return true, err
		}
		f.Path, f.Content, f.SHA256, f.Seq = d.Path, d.Content, d.SHA256, ev.Seq
		for _, rd := range f.Resources {
			if err := updateRD(t, rd, ev.Seq, func(*ResourceDefinition) error { return nil }); err != nil {
				return true, err
			}
		}
		return true, t.put(fileKey(d.Path), f)
	case *events.ExternalFileDeleted:
		var f ExternalFile
		if ok, err := getJSON(t, fileKey(d.Path), &f); err != nil || !ok {
			return true, err
		}
		for _, rd := range f.Resources {
			if err := updateRD(t, rd, ev.Seq, func(rd *ResourceDefinition) error {
				rd.Files = slices.DeleteFunc(rd.Files, func(p string) bool { return p == d.Path })
				return nil
			}); err != nil {
				return true, err
			}
		}
		t.del(fileKey(d.Path))
		return true, nil
	case *events.ExternalFileDeployed:
		if err := updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			rd.Files = sortedInsert(rd.Files, d.Path)
			return nil
		}); err != nil {
			return true, err
		}
		return true, updateFile(t, d.Path, func(f *ExternalFile) { f.Resources = sortedInsert(f.Resources, d.Resource) })
	case *events.ExternalFileUndeployed:
		if err := updateRD(t, d.Resource, ev.Seq, func(rd *ResourceDefinition) error {
			rd.Files = slices.DeleteFunc(rd.Files, func(p string) bool { return p == d.Path })
			return nil
		}); err != nil {
			return true, err
		}
		return true, updateFile(t, d.Path, func(f *ExternalFile) {
			f.Resources = slices.DeleteFunc(f.Resources, func(r string) bool { return r == d.Resource })
		})
	}
	return false, nil
}

// forgetDeployments removes a deleted definition from the files it deployed.
func forgetDeployments(t *tx, rd ResourceDefinition) error {
	for _, p := range rd.Files {
		if err := updateFile(t, p, func(f *ExternalFile) {
			f.Resources = slices.DeleteFunc(f.Resources, func(r string) bool { return r == rd.Name })
		}); err != nil {
			return err
		}
	}
	return nil
}

// updateFile changes a registered file (one that does not exist is left alone).
func updateFile(t *tx, path string, change func(*ExternalFile)) error {
	var f ExternalFile
	if ok, err := getJSON(t, fileKey(path), &f); err != nil || !ok {
		return err
	}
	change(&f)
	return t.put(fileKey(path), f)
}

func sortedInsert(s []string, v string) []string {
	i, found := slices.BinarySearch(s, v)
	if found {
		return s
	}
	return slices.Insert(s, i, v)
}

// ExternalFile returns a registered file (ok false when there is none).
func (v *View) ExternalFile(path string) (f ExternalFile, ok bool, err error) {
	ok, err = getJSON(v.r, fileKey(path), &f)
	return
}

// EachExternalFile calls fn with every registered file in path order, one at a time,
// until fn returns false or an error (which EachExternalFile returns).
func (v *View) EachExternalFile(fn func(f ExternalFile) (more bool, err error)) error {
	return stopped(v.scan(filePrefix, func(key string, val []byte) error {
		var f ExternalFile
		if err := unmarshalInto(key, val, &f); err != nil {
			return err
		}
		if f.Path == "" {
			f.Path = strings.TrimPrefix(key, filePrefix)
		}
		return goOn(fn(f))
	}))
}
