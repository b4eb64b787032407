// Package remotes decides the remote verbs (remote.create, remote.modify, remote.delete),
// backup.delete and the backup schedules (schedule.create, schedule.delete,
// backup.schedule-enable, backup.schedule-disable): the object stores backups go to, each on its own subject
// (cairn.ev.remote.<name>). A remote's secret key is sealed at admission (package
// secret) and only the sealed form is ever recorded.
package remotes

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/secret"
)

// RemoteCreate is the body of remote.create: an S3 remote (kind s3), or another Cairn
// cluster (kind cairn: Endpoint its HTTP API, Token its API token, "" when it needs
// none).
type RemoteCreate struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Endpoint  string `json:"endpoint"`
	Bucket    string `json:"bucket,omitempty"`
	Region    string `json:"region,omitempty"`
	PathStyle bool   `json:"path_style,omitempty"`
	AccessKey string `json:"access_key,omitempty"`
	SecretKey string `json:"secret_key,omitempty"`
	Token     string `json:"token,omitempty"`
	// EncryptionPassphrase, when set, has the agents encrypt every chunk before it
	// leaves the node; a restore, on any cluster, needs the same passphrase.
	EncryptionPassphrase string `json:"encryption_passphrase,omitempty"`
}

// RemoteModify is the body of remote.modify: the fields given change.
type RemoteModify struct {
	Name      string  `json:"name"`
	Endpoint  *string `json:"endpoint,omitempty"`
	Bucket    *string `json:"bucket,omitempty"`
	Region    *string `json:"region,omitempty"`
	PathStyle *bool   `json:"path_style,omitempty"`
	AccessKey *string `json:"access_key,omitempty"`
	SecretKey *string `json:"secret_key,omitempty"`
	Token     *string `json:"token,omitempty"`
}

// RemoteDelete is the body of remote.delete.
type RemoteDelete struct {
	Name string `json:"name"`
}

// BackupDelete is the body of backup.delete.
type BackupDelete struct {
	Remote   string `json:"remote"`
	Resource string `json:"resource"`
	ID       string `json:"id"`
}

// Sealer seals a secret for the events (secret.Key.Seal); nil where this serve has no
// secrets key.
type Sealer func(plaintext string) (secret.Sealed, error)

// Handlers decide the remote verbs, each bounded by the remote's subject. seal seals
// remote.create's secret key.
func Handlers(seal Sealer) []decide.Handler {
	return append(scheduleHandlers(), []decide.Handler{
		{Verb: "remote.create", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c RemoteCreate
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, names.Event("remote", c.Name)) })
			if err != nil {
				return d, err
			}
			ev, err := decideCreate(v, seal, c)
			return d.With(names.Event("remote", c.Name), ev, nil), err
		}},
		{Verb: "remote.modify", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c RemoteModify
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, names.Event("remote", c.Name)) })
			if err != nil {
				return d, err
			}
			ev, warnings, err := decideModify(v, seal, c)
			return d.With(names.Event("remote", c.Name), ev, warnings), err
		}},
		{Verb: "remote.delete", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c RemoteDelete
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, names.Event("remote", c.Name)) })
			if err != nil {
				return d, err
			}
			if err := exists(v, c.Name); err != nil {
				return d, err
			}
			if err := refuseUnderWay(v, c.Name, func(b projections.BackupUnderWay) bool { return true }, "it is deleted"); err != nil {
				return d, err
			}
			return d.With(names.Event("remote", c.Name), &events.RemoteDeleted{Name: c.Name}, nil), nil
		}},
		{Verb: "backup.delete", Decide: func(v *projections.View, names events.Names, body []byte) (decide.Decision, error) {
			var c BackupDelete
			d, err := decide.DecodeWithBoundary(body, &c, func() (events.Expect, error) { return decide.SubjectBoundary(v, names.Event("remote", c.Remote)) })
			if err != nil {
				return d, err
			}
			if c.Remote == events.RemoteReceived { // this cluster's received store: no upload of its own goes there
				return d.With(names.Event("remote", c.Remote), &events.RemoteBackupDeleted{Remote: c.Remote, Resource: c.Resource, ID: c.ID}, nil), nil
			}
			if err := exists(v, c.Remote); err != nil {
				return d, err
			}
			err = refuseUnderWay(v, c.Remote, func(b projections.BackupUnderWay) bool {
				return b.Resource == c.Resource && (b.ID == c.ID || b.Base == c.ID)
			}, "backup "+c.ID+" is deleted")
			if err != nil {
				return d, err
			}
			return d.With(names.Event("remote", c.Remote), &events.RemoteBackupDeleted{Remote: c.Remote, Resource: c.Resource, ID: c.ID}, nil), nil
		}},
	}...)
}

// decideCreate seals the secret key of a new remote. Refuses already_exists,
// invalid_argument (kind, endpoint), precondition_failed when this serve cannot seal.
func decideCreate(v *projections.View, seal Sealer, c RemoteCreate) (*events.RemoteCreated, error) {
	if r, ok, err := v.Remote(c.Name); err != nil || ok {
		if err == nil {
			err = cairn.Errorf(cairn.CodeAlreadyExists, "remote %s already exists (%s %s/%s)", c.Name, r.Kind, r.Endpoint, r.Bucket).About(cairn.ObjRemote)
		}
		return nil, err
	}
	if c.Name == events.RemoteReceived {
		return nil, cairn.InvalidField("name", "%q names this cluster's store of the backups shipped to it; choose another name", events.RemoteReceived)
	}
	switch c.Kind {
	case events.RemoteS3:
		if c.Token != "" {
			return nil, cairn.InvalidField("token", "an S3 remote has access_key and secret_key, not a token")
		}
		if err := checkEndpoint(c.Endpoint); err != nil {
			return nil, err
		}
	case events.RemoteCairn:
		for _, f := range []struct {
			name string
			set  bool
		}{{"bucket", c.Bucket != ""}, {"region", c.Region != ""}, {"path_style", c.PathStyle}, {"access_key", c.AccessKey != ""},
			{"secret_key", c.SecretKey != ""}, {"encryption_passphrase", c.EncryptionPassphrase != ""}} {
			if f.set {
				return nil, cairn.InvalidField(f.name, "a cluster remote (kind cairn) has an endpoint and a token only")
			}
		}
		if err := checkClusterURL(c.Endpoint); err != nil {
			return nil, err
		}
		c.SecretKey = c.Token
	default:
		return nil, cairn.InvalidField("kind", "must be s3 or cairn, got %q", c.Kind)
	}
	if seal == nil {
		return nil, cairn.Errorf(cairn.CodePreconditionFailed, "this serve has no secrets key to seal the remote's secret key with (cairn serve --secrets-key)")
	}
	sealed, err := seal(c.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("seal the secret key: %w", err)
	}
	ev := &events.RemoteCreated{Name: c.Name, Kind: c.Kind, Endpoint: c.Endpoint, Bucket: c.Bucket, Region: c.Region,
		PathStyle: c.PathStyle, AccessKey: c.AccessKey, SecretKey: sealed}
	if c.EncryptionPassphrase != "" {
		pass, err := seal(c.EncryptionPassphrase)
		if err != nil {
			return nil, fmt.Errorf("seal the encryption passphrase: %w", err)
		}
		ev.EncryptionPassphrase = &pass
	}
	return ev, nil
}

// decideModify changes the fields given. Refuses not_found, invalid_argument (endpoint),
// precondition_failed for another endpoint or bucket while an upload to the remote is
// under way (its chunks would land in two places); new credentials are fine (an agent
// asks for them on every attempt). Nothing changed is a no-op with a warning.
func decideModify(v *projections.View, seal Sealer, c RemoteModify) (*events.RemoteModified, []string, error) {
	r, ok, err := v.Remote(c.Name)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, cairn.Errorf(cairn.CodeNotFound, "remote %s does not exist", c.Name).About(cairn.ObjRemote)
	}
	ev := events.RemoteModified{Name: r.Name, Kind: r.Kind, Endpoint: r.Endpoint, Bucket: r.Bucket, Region: r.Region, PathStyle: r.PathStyle,
		AccessKey: r.AccessKey, SecretKey: r.SecretKey, EncryptionPassphrase: r.EncryptionPassphrase}
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	set(&ev.Endpoint, c.Endpoint)
	set(&ev.Bucket, c.Bucket)
	set(&ev.Region, c.Region)
	set(&ev.AccessKey, c.AccessKey)
	if c.PathStyle != nil {
		ev.PathStyle = *c.PathStyle
	}
	secretKey, check := c.SecretKey, checkEndpoint
	if r.Kind == events.RemoteCairn {
		if c.Bucket != nil || c.Region != nil || c.PathStyle != nil || c.AccessKey != nil || c.SecretKey != nil {
			return nil, nil, cairn.InvalidField("bucket", "remote %s is a cluster (kind cairn): only endpoint and token change", c.Name)
		}
		secretKey, check = c.Token, checkClusterURL
	} else if c.Token != nil {
		return nil, nil, cairn.InvalidField("token", "remote %s is an S3 remote: it has a secret_key, not a token", c.Name)
	}
	if err := check(ev.Endpoint); err != nil {
		return nil, nil, err
	}
	if ev.Endpoint != r.Endpoint || ev.Bucket != r.Bucket {
		if err := refuseUnderWay(v, c.Name, func(projections.BackupUnderWay) bool { return true }, "its endpoint or bucket changes"); err != nil {
			return nil, nil, err
		}
	}
	changed := ev.Endpoint != r.Endpoint || ev.Bucket != r.Bucket || ev.Region != r.Region || ev.PathStyle != r.PathStyle || ev.AccessKey != r.AccessKey
	if secretKey != nil {
		if seal == nil {
			return nil, nil, cairn.Errorf(cairn.CodePreconditionFailed, "this serve has no secrets key to seal the remote's secret key with (cairn serve --secrets-key)")
		}
		if ev.SecretKey, err = seal(*secretKey); err != nil {
			return nil, nil, fmt.Errorf("seal the secret key: %w", err)
		}
		changed = true
	}
	if !changed {
		return nil, []string{"remote " + c.Name + " already has this configuration; nothing changed"}, nil
	}
	return &ev, nil, nil
}

// checkEndpoint refuses an endpoint that is not http(s)://host[:port] or host[:port].
func checkEndpoint(e string) error {
	if strings.Contains(e, "://") {
		if u, err := url.Parse(e); err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" || u.Path != "" && u.Path != "/" {
			return cairn.InvalidField("endpoint", "must be http(s)://host[:port] or host[:port], got %q", e)
		}
	}
	return nil
}

// checkClusterURL refuses a cluster remote's endpoint that is not http(s)://host[:port]
// (a path, a query or another scheme).
func checkClusterURL(e string) error {
	u, err := url.Parse(e)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" || u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.User != nil {
		return cairn.InvalidField("endpoint", "must be the other cluster's HTTP API as http(s)://host[:port], got %q", e)
	}
	return nil
}

func exists(v *projections.View, name string) error {
	if _, ok, err := v.Remote(name); err != nil || ok {
		return err
	}
	return cairn.Errorf(cairn.CodeNotFound, "remote %s does not exist", name).About(cairn.ObjRemote)
}

// refuseUnderWay refuses precondition_failed when an upload to remote that match
// selects is under way. Not a read to check: every upload's start appends a claim on
// the remote's subject (remote.claimed), which the decision is conditional on.
func refuseUnderWay(v *projections.View, remote string, match func(projections.BackupUnderWay) bool, what string) error {
	busy, err := v.Unchecked().BackupsUnderWay()
	if err != nil {
		return err
	}
	for _, b := range busy {
		if b.Remote == remote && match(b) {
			return cairn.Errorf(cairn.CodePreconditionFailed, "backup %s of %s to remote %s is uploading (base %q); abort it (backup.abort) or let it finish before %s",
				b.ID, b.Resource, remote, b.Base, what)
		}
	}
	return nil
}
