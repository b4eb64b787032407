// Package files decides the external file verbs (file.set, file.delete, rd.file-deploy,
// rd.file-undeploy): LINSTOR's external files, which integrations such as
// linstor-gateway write their drbd-reactor and systemd configuration with. A file is
// registered once (cairn.ev.file.<events.FileID(path)>) and deployed with definitions
// (on the definition's subject); the agent of every node holding a replica of one of them
// writes it, where its --allow-ext-files lets it.
package files

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"path"
	"reflect"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

type (
	// FileSet is the body of file.set (Content is base64 in JSON).
	FileSet struct {
		Path    string `json:"path"`
		Content []byte `json:"content"`
	}
	// FileRef is the body of file.delete.
	FileRef struct {
		Path string `json:"path"`
	}
	// FileDeploy is the body of rd.file-deploy and rd.file-undeploy.
	FileDeploy struct {
		Resource string `json:"resource"`
		Path     string `json:"path"`
	}
)

// MaxContent is the largest content a file may have (64 KiB; the schema's bound too).
const MaxContent = 64 << 10

// CheckPath refuses (invalid_argument, field "path") a path that is not absolute and
// clean: a "." or ".." element, "//" or a trailing "/" would name one file in two ways.
func CheckPath(p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return cairn.InvalidField("path", "%q is not an absolute, clean file path (no '.' or '..' element, no '//', no trailing '/')", p)
	}
	return nil
}

// DecideFileSet registers a file or replaces its content. Refuses invalid_argument for
// a bad path or content over MaxContent; the same content again is a no-op with a
// warning.
func DecideFileSet(current *projections.ExternalFile, c FileSet) (*events.ExternalFileSet, []string, error) {
	if err := CheckPath(c.Path); err != nil {
		return nil, nil, err
	}
	if len(c.Content) > MaxContent {
		return nil, nil, cairn.InvalidField("content", "%d bytes; a file holds at most %d", len(c.Content), MaxContent)
	}
	if current != nil && bytes.Equal(current.Content, c.Content) {
		return nil, []string{"external file " + c.Path + " already has this content; nothing changed"}, nil
	}
	sum := sha256.Sum256(c.Content)
	content := c.Content
	if content == nil {
		content = []byte{}
	}
	return &events.ExternalFileSet{Path: c.Path, Content: content, SHA256: hex.EncodeToString(sum[:])}, nil, nil
}

// DecideFileDelete removes a registered file; one that does not exist is not_found.
func DecideFileDelete(current *projections.ExternalFile, c FileRef) (*events.ExternalFileDeleted, error) {
	if err := CheckPath(c.Path); err != nil {
		return nil, err
	}
	if current == nil {
		return nil, notFound(c.Path)
	}
	return &events.ExternalFileDeleted{Path: c.Path}, nil
}

// DecideDeploy has definition c.Resource deploy (deploy true) or stop deploying file
// c.Path. Refuses invalid_argument for a bad path, not_found for a definition or file that does not exist; deploying a
// file the definition already deploys, or undeploying one it does not, is a no-op with
// a warning.
func DecideDeploy(rd *projections.ResourceDefinition, file *projections.ExternalFile, c FileDeploy, deploy bool) (events.Payload, []string, error) {
	if err := CheckPath(c.Path); err != nil {
		return nil, nil, err
	}
	if rd == nil {
		return nil, nil, cairn.Errorf(cairn.CodeNotFound, "resource definition %s does not exist", c.Resource).About(cairn.ObjResourceDefinition)
	}
	if file == nil {
		return nil, nil, notFound(c.Path)
	}
	deployed := false
	for _, p := range rd.Files {
		deployed = deployed || p == c.Path
	}
	switch {
	case deploy && deployed:
		return nil, []string{"resource definition " + c.Resource + " already deploys " + c.Path + "; nothing changed"}, nil
	case !deploy && !deployed:
		return nil, []string{"resource definition " + c.Resource + " does not deploy " + c.Path + "; nothing changed"}, nil
	case deploy:
		return &events.ExternalFileDeployed{Resource: c.Resource, Path: c.Path}, nil, nil
	}
	return &events.ExternalFileUndeployed{Resource: c.Resource, Path: c.Path}, nil, nil
}

func notFound(p string) error {
	return cairn.Errorf(cairn.CodeNotFound, "external file %s does not exist", p).About(cairn.ObjExternalFile)
}

// onFile is a verb on one file, bounded by its subject: decide gets the body's path and
// the file as the view has it (nil: none).
func onFile(verb string, decideFn func(path string, f *projections.ExternalFile, body []byte) (events.Payload, []string, error)) decide.Handler {
	return decide.Handler{Verb: verb, Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
		var c FileRef
		subject := func() string { return names.Event("file", events.FileID(c.Path)) }
		d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, subject()) })
		if err != nil {
			return d, err
		}
		f, ok, err := v.ExternalFile(c.Path)
		if err != nil {
			return d, err
		}
		ev, warnings, err := decideFn(c.Path, decide.Ptr(f, ok), body)
		if err != nil || ev == nil || reflect.ValueOf(ev).IsNil() {
			return d.With("", nil, warnings), err
		}
		return d.With(subject(), ev, warnings), nil
	}}
}

// Handlers decide the external file verbs. file.set and file.delete are bounded by the
// file's subject; rd.file-deploy and rd.file-undeploy read the file's and the
// definition's subjects and append on the definition's.
func Handlers() []decide.Handler {
	fileSubject := func(names events.Names, p string) string { return names.Event("file", events.FileID(p)) }
	deployVerb := func(verb string, deploy bool) decide.Handler {
		return decide.Handler{Verb: verb, Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c FileDeploy
			if err := decide.DecodeBody(body, &c); err != nil {
				return decide.Decision{}, err
			}
			r := decide.NewReads(v, names)
			if err := r.Subject(fileSubject(names, c.Path)); err != nil {
				return decide.Decision{}, err
			}
			if err := r.Of("rd", c.Resource); err != nil {
				return decide.Decision{}, err
			}
			rd, okRD, err := v.ResourceDefinition(c.Resource)
			if err != nil {
				return decide.Decision{}, err
			}
			f, okF, err := v.ExternalFile(c.Path)
			if err != nil {
				return decide.Decision{}, err
			}
			ev, warnings, err := DecideDeploy(decide.Ptr(rd, okRD), decide.Ptr(f, okF), c, deploy)
			d := r.Decide(decide.Decision{})
			if err != nil || ev == nil {
				return d.With("", nil, warnings), err
			}
			return d.With(names.Event("rd", c.Resource), ev, nil), nil
		}}
	}
	return []decide.Handler{
		onFile("file.set", func(p string, f *projections.ExternalFile, body []byte) (events.Payload, []string, error) {
			var c FileSet
			if err := decide.DecodeBody(body, &c); err != nil {
				return nil, nil, err
			}
			return DecideFileSet(f, c)
		}),
		onFile("file.delete", func(p string, f *projections.ExternalFile, _ []byte) (events.Payload, []string, error) {
			ev, err := DecideFileDelete(f, FileRef{Path: p})
			return ev, nil, err
		}),
		deployVerb("rd.file-deploy", true),
		deployVerb("rd.file-undeploy", false),
	}
}
