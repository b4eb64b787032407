package events

import (
	"crypto/sha256"
	"encoding/hex"
)

// ExternalFileSet: an external file (LINSTOR's /v1/files) was registered or its content
// replaced. Path is absolute and clean; SHA256 is the hex digest of Content. Agents
// write it on every node that holds a replica of a definition it is deployed with.
type ExternalFileSet struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
	SHA256  string `json:"sha256"`
}

// ExternalFileDeleted: an external file is gone; every definition it was deployed with
// no longer deploys it, and agents remove it where nothing else needs it.
type ExternalFileDeleted struct {
	Path string `json:"path"`
}

// ExternalFileDeployed: definition Resource deploys file Path (on its own subject).
type ExternalFileDeployed struct {
	Resource string `json:"resource"`
	Path     string `json:"path"`
}

// ExternalFileUndeployed: definition Resource no longer deploys file Path.
type ExternalFileUndeployed struct {
	Resource string `json:"resource"`
	Path     string `json:"path"`
}

func (*ExternalFileSet) EventType() string        { return "file.set" }
func (*ExternalFileDeleted) EventType() string    { return "file.deleted" }
func (*ExternalFileDeployed) EventType() string   { return "rd.file-deployed" }
func (*ExternalFileUndeployed) EventType() string { return "rd.file-undeployed" }

// FileID is the subject token of an external file's events (cairn.ev.file.<id>): the
// first 16 bytes of the SHA-256 of its path, in hex (a path holds characters a subject
// token may not).
func FileID(path string) string {
	sum := sha256.Sum256([]byte(path))
	return hex.EncodeToString(sum[:16])
}

func init() {
	Register(Type{Name: "file.set", Version: 1, New: func() Payload { return new(ExternalFileSet) }})
	Register(Type{Name: "file.deleted", Version: 1, New: func() Payload { return new(ExternalFileDeleted) }})
	Register(Type{Name: "rd.file-deployed", Version: 1, New: func() Payload { return new(ExternalFileDeployed) }})
	Register(Type{Name: "rd.file-undeployed", Version: 1, New: func() Payload { return new(ExternalFileUndeployed) }})
}
