package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/policy"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backup"
	"github.com/cairn-io/cairn/storage/backup/httpstore"
	"github.com/cairn-io/cairn/storage/backup/s3store"
	"github.com/cairn-io/cairn/storage/secret"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// RemoteRequest is an agent's request for a remote's credentials.
type RemoteRequest struct {
	Remote string `json:"remote"`
}

// RemoteReply answers it: the remote's S3 configuration with the secret opened, another
// cluster's URL with its token opened, or this cluster's received store; or why not.
// It travels only as a NATS reply, never stored.
type RemoteReply struct {
	S3      *s3store.Config   `json:"s3,omitempty"`
	Cluster *httpstore.Config `json:"cluster,omitempty"`
	// Received: the remote is this cluster's received store, read through a serve
	// (ReceivedReader).
	Received bool `json:"received,omitempty"`
	// Passphrase encrypts the remote's chunks ("" : not encrypted).
	Passphrase string `json:"passphrase,omitempty"`
	Error      string `json:"error,omitempty"`
}

// RemoteStore is a remote's store as agents and serves use it: the backup format's
// Store and a check of its access before anything is sent.
type RemoteStore interface {
	backup.Store
	Check(context.Context) error
}

// EncryptedStore is a remote's store whose chunks are encrypted (backup.Encrypted).
type EncryptedStore struct {
	RemoteStore
	C *backup.Cipher
}

// Cipher is the store's chunk cipher.
func (e EncryptedStore) Cipher() *backup.Cipher { return e.C }

// OpenRemote is the store of a remote's access: encrypted when it has a passphrase.
// received reads this cluster's received store (nil where there is none).
func OpenRemote(r RemoteReply, received RemoteStore) (RemoteStore, error) {
	var st RemoteStore
	var err error
	switch {
	case r.S3 != nil:
		st, err = s3store.New(*r.S3)
	case r.Cluster != nil:
		st, err = httpstore.New(*r.Cluster, nil)
	case r.Received && received != nil:
		st = received
	default:
		err = errors.New("the remote's access names no store")
	}
	if err != nil || r.Passphrase == "" {
		return st, err
	}
	c, err := backup.NewCipher(r.Passphrase)
	if err != nil {
		return nil, err
	}
	return EncryptedStore{RemoteStore: st, C: c}, nil
}

// remoteAccess opens remote name's configuration and passphrase from the views with key.
func remoteAccess(db *projections.DB, key *secret.Key, name string) (RemoteReply, error) {
	if name == events.RemoteReceived {
		return RemoteReply{Received: true}, nil
	}
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
	if r.Kind == events.RemoteCairn {
		out = RemoteReply{Cluster: &httpstore.Config{URL: r.Endpoint, Token: sk}}
	}
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
	return OpenRemote(r, s.Received)
}

// ClusterAccess is the URL and opened token of remote name, a remote of kind cairn.
// Errors: not_found, precondition_failed (another kind; sealed with another key).
func (s *Server) ClusterAccess(name string) (httpstore.Config, error) {
	r, err := remoteAccess(s.DB, s.Secrets, name)
	if err != nil {
		return httpstore.Config{}, err
	}
	if r.Cluster == nil {
		return httpstore.Config{}, cairn.Errorf(cairn.CodePreconditionFailed, "remote %s is not another cluster (kind cairn)", name)
	}
	return *r.Cluster, nil
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
		} else if !r.Received {
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

// ReceivedPiece is the most of an object one reply of a received-store read carries
// (under NATS's default 1 MiB message limit).
const ReceivedPiece = 512 << 10

// ReceivedRequest asks a serve for a piece of an object of the received store: the
// bytes from Offset on (at most ReceivedPiece). Key "" only checks that a serve
// answers.
type ReceivedRequest struct {
	Key    string `json:"key"`
	Offset int    `json:"offset"`
}

// Headers of a received-store reply: the object's size, or why there is none.
const (
	receivedSizeHeader     = "Cairn-Size"
	receivedErrorHeader    = "Cairn-Error"
	receivedNotFoundHeader = "Cairn-Not-Found"
)

// answerReceived answers agents' reads of the received store
// (<prefix>.agent.<node>.received) in a queue group, for nodes in the cluster: an
// agent restoring a backup another cluster shipped here reads its chunks so, in
// pieces, up to receivedReadsAtOnce at once. The last objects read are kept for the
// pieces that follow.
func answerReceived(nc *nats.Conn, names events.Names, db *projections.DB, st backup.Store, log zerolog.Logger) (*nats.Subscription, error) {
	cache, _ := lru.New[string, []byte](2 * receivedReadsAtOnce)
	busy := make(chan struct{}, receivedReadsAtOnce)
	answer := recovering(log, "received", func(m *nats.Msg) {
		node, ok := names.ParseAgentReceived(m.Subject)
		if !ok {
			return
		}
		reply := nats.NewMsg(m.Reply)
		var req ReceivedRequest
		err := json.Unmarshal(m.Data, &req)
		if err == nil {
			err = nodeInCluster(db, node)
		}
		var data []byte
		if err == nil && req.Key != "" {
			var hit bool
			if data, hit = cache.Get(req.Key); !hit {
				if data, err = st.Get(context.Background(), req.Key); err == nil {
					cache.Add(req.Key, data)
				}
			}
		}
		switch {
		case errors.Is(err, backup.ErrNotFound):
			reply.Header.Set(receivedNotFoundHeader, "1")
			reply.Header.Set(receivedErrorHeader, err.Error())
		case err != nil:
			reply.Header.Set(receivedErrorHeader, err.Error())
			log.Warn().Err(err).Str("node", node).Str("key", req.Key).Msg("received store read refused")
		case req.Offset < 0 || req.Offset > len(data):
			reply.Header.Set(receivedErrorHeader, fmt.Sprintf("offset %d is outside %s (%d bytes)", req.Offset, req.Key, len(data)))
		default:
			reply.Header.Set(receivedSizeHeader, strconv.Itoa(len(data)))
			reply.Data = data[req.Offset:min(len(data), req.Offset+ReceivedPiece)]
		}
		_ = m.RespondMsg(reply)
	})
	return nc.QueueSubscribe(names.AgentReceivedFilter(), "cairn-received", func(m *nats.Msg) {
		busy <- struct{}{} // at most receivedReadsAtOnce at once; the next wait in NATS's queue
		go func() {
			defer func() { <-busy }()
			answer(m)
		}()
	})
}

// receivedReadsAtOnce is how many reads of the received store a serve answers at once
// (an agent's restore reads backup.RestoreWorkers chunks at once).
const receivedReadsAtOnce = 16

// ReceivedReader reads this cluster's received store through a serve, in pieces
// (answerReceived): what an agent restores a backup shipped here from. It only reads:
// Put, List and Delete fail.
type ReceivedReader struct {
	NC      *nats.Conn
	Subject string // names.AgentReceived(node)
}

func (r ReceivedReader) piece(ctx context.Context, key string, offset int) (*nats.Msg, error) {
	body, _ := json.Marshal(ReceivedRequest{Key: key, Offset: offset})
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	m, err := r.NC.RequestWithContext(rctx, r.Subject, body)
	if err != nil {
		return nil, fmt.Errorf("read %s of the received store through a serve: %w", key, err)
	}
	if why := m.Header.Get(receivedErrorHeader); why != "" {
		if m.Header.Get(receivedNotFoundHeader) != "" {
			return nil, fmt.Errorf("%s: %w", why, backup.ErrNotFound)
		}
		return nil, errors.New(why)
	}
	return m, nil
}

// Check asks a serve whether it answers.
func (r ReceivedReader) Check(ctx context.Context) error {
	_, err := r.piece(ctx, "", 0)
	return err
}

// Get reads the object under key, piece by piece.
func (r ReceivedReader) Get(ctx context.Context, key string) ([]byte, error) {
	var out []byte
	for {
		m, err := r.piece(ctx, key, len(out))
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(m.Header.Get(receivedSizeHeader))
		if err != nil {
			return nil, fmt.Errorf("read %s: the reply names no size", key)
		}
		if out == nil {
			out = make([]byte, 0, size)
		}
		out = append(out, m.Data...)
		if len(out) >= size || len(m.Data) == 0 {
			if len(out) != size {
				return nil, fmt.Errorf("read %s: %d bytes of %d", key, len(out), size)
			}
			return out, nil
		}
	}
}

var errReadOnly = errors.New("the received store is read through a serve: read only")

// Put fails: agents do not write the received store.
func (ReceivedReader) Put(context.Context, string, []byte, [32]byte) error { return errReadOnly }

// List fails: agents do not list the received store.
func (ReceivedReader) List(context.Context, string) ([]backup.Object, error) { return nil, errReadOnly }

// Delete fails: agents do not delete from the received store.
func (ReceivedReader) Delete(context.Context, string) error { return errReadOnly }

// shipRestore asks remote's cluster to restore shipped backup r (policy.Shipper): on
// its nodes, or on one node the target picks when none were named.
func (s *Server) shipRestore(ctx context.Context, remote string, r policy.ShipRestore) (answered bool, err error) {
	acc, err := s.ClusterAccess(remote)
	if err != nil {
		return true, err // the remote is gone or unreadable: no ask can succeed
	}
	st, err := httpstore.New(acc, nil)
	if err != nil {
		return true, err
	}
	req := httpstore.RestoreRequest{Target: r.Target, Nodes: r.Nodes, StoragePool: r.StoragePool, ResourceGroup: r.ResourceGroup}
	if len(req.Nodes) == 0 {
		req.PlaceCount = 1
	}
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return st.Restore(actx, r.Resource, r.ID, req)
}
