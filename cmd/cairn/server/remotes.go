package server

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backup"
	"github.com/cairn-io/cairn/storage/backup/s3store"
	"github.com/cairn-io/cairn/storage/secret"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// RemoteRequest is an agent's request for a remote's credentials.
type RemoteRequest struct {
	Remote string `json:"remote"`
}

// RemoteReply answers it: the remote's S3 configuration with the secret opened, or why
// not. It travels only as a NATS reply, never stored.
type RemoteReply struct {
	S3 *s3store.Config `json:"s3,omitempty"`
	// Passphrase encrypts the remote's chunks ("" : not encrypted).
	Passphrase string `json:"passphrase,omitempty"`
	Error      string `json:"error,omitempty"`
}

// EncryptedStore is a remote's store whose chunks are encrypted (backup.Encrypted).
type EncryptedStore struct {
	*s3store.Store
	C *backup.Cipher
}

// Cipher is the store's chunk cipher.
func (e EncryptedStore) Cipher() *backup.Cipher { return e.C }

// OpenRemote is the store of a remote's access: encrypted when it has a passphrase.
func OpenRemote(r RemoteReply) (interface {
	backup.Store
	Check(context.Context) error
}, error) {
	st, err := s3store.New(*r.S3)
	if err != nil || r.Passphrase == "" {
		return st, err
	}
	c, err := backup.NewCipher(r.Passphrase)
	if err != nil {
		return nil, err
	}
	return EncryptedStore{Store: st, C: c}, nil
}

// remoteAccess opens remote name's configuration and passphrase from the views with key.
func remoteAccess(db *projections.DB, key *secret.Key, name string) (RemoteReply, error) {
	v, err := db.Read()
	if err != nil {
		return RemoteReply{}, err
	}
	r, ok, err := v.Remote(name)
	v.Close()
	if err != nil {
		return RemoteReply{}, err
	}
	if !ok {
		return RemoteReply{}, cairn.Errorf(cairn.CodeNotFound, "remote %s does not exist", name).About(cairn.ObjRemote)
	}
	if key == nil {
		return RemoteReply{}, cairn.Errorf(cairn.CodePreconditionFailed, "this serve has no secrets key")
	}
	sk, err := key.Open(r.SecretKey)
	if err != nil {
		return RemoteReply{}, cairn.Errorf(cairn.CodePreconditionFailed, "remote %s: %v", name, err)
	}
	out := RemoteReply{S3: &s3store.Config{Endpoint: r.Endpoint, Bucket: r.Bucket, Region: r.Region, AccessKey: r.AccessKey, SecretKey: sk, PathStyle: r.PathStyle}}
	if r.EncryptionPassphrase != nil {
		if out.Passphrase, err = key.Open(*r.EncryptionPassphrase); err != nil {
			return RemoteReply{}, cairn.Errorf(cairn.CodePreconditionFailed, "remote %s: %v", name, err)
		}
	}
	return out, nil
}

// RemoteStore returns the object store of remote name, its secret (and encryption
// passphrase) opened with this serve's secrets key. Errors: not_found (no such remote),
// precondition_failed (the secret was sealed with another key).
func (s *Server) RemoteStore(name string) (backup.Store, error) {
	r, err := remoteAccess(s.DB, s.Secrets, name)
	if err != nil {
		return nil, err
	}
	return OpenRemote(r)
}

// answerRemotes answers agents' remote requests (<prefix>.agent.<node>.remote) in a
// queue group, for nodes in the cluster: an agent needs a remote's credentials to
// upload a backup or restore one. With per-node NATS users (cairn serve --auth) a node
// may ask only as itself.
func answerRemotes(_ context.Context, nc *nats.Conn, names events.Names, db *projections.DB, key *secret.Key, log zerolog.Logger) (*nats.Subscription, error) {
	return nc.QueueSubscribe(names.AgentRemoteFilter(), "cairn-remote", recovering(log, "remote", func(m *nats.Msg) {
		node, ok := names.ParseAgentRemote(m.Subject)
		if !ok {
			return
		}
		var req RemoteRequest
		var r RemoteReply
		err := json.Unmarshal(m.Data, &req)
		if err == nil {
			err = nodeInCluster(db, node)
		}
		if err == nil {
			r, err = remoteAccess(db, key, req.Remote)
		}
		if err != nil {
			r.Error = err.Error()
			log.Warn().Err(err).Str("node", node).Str("remote", req.Remote).Msg("remote credentials refused")
		} else {
			log.Info().Str("node", node).Str("remote", req.Remote).Msg("remote credentials handed to an agent")
		}
		body, _ := json.Marshal(r)
		_ = m.Respond(body)
	}))
}

func nodeInCluster(db *projections.DB, node string) error {
	v, err := db.Read()
	if err != nil {
		return err
	}
	defer v.Close()
	if _, ok, err := v.Node(node); err != nil || ok {
		return err
	}
	return fmt.Errorf("node %s is not in the cluster", node)
}
