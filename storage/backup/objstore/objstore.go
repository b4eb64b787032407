// Package objstore is the backup format's Store (storage/backup) on a JetStream object
// store: where a cluster keeps the backups other clusters ship to it (the bucket
// events.Names.ReceivedBucket, replicated like the cluster's streams). Only serves open
// it: other clusters write to it through the HTTP API (package httpstore), this
// cluster's agents read it through a serve (cairn.agent.<node>.received).
package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-io/cairn/storage/backup"
)

// Store is a backup.Store on one JetStream object store bucket.
type Store struct {
	obs jetstream.ObjectStore
}

// Open creates the bucket when it does not exist (file storage, replicas copies) and
// returns its Store.
func Open(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (*Store, error) {
	obs, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: bucket, Replicas: max(replicas, 1),
		Storage: jetstream.FileStorage, Description: "backups other clusters shipped to this one (cairn backup ship)"})
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", bucket, err)
	}
	return &Store{obs: obs}, nil
}

// Check reports whether the bucket answers.
func (s *Store) Check(ctx context.Context) error {
	_, err := s.obs.Status(ctx)
	return err
}

// Put stores data under key after checking it against sum: a mismatch is refused
// (ErrPermanent), nothing stored.
func (s *Store) Put(ctx context.Context, key string, data []byte, sum [32]byte) error {
	if got := sha256.Sum256(data); got != sum {
		return fmt.Errorf("%w: %s: the data's SHA-256 is %s, not %s", backup.ErrPermanent, key, hex.EncodeToString(got[:]), hex.EncodeToString(sum[:]))
	}
	_, err := s.obs.PutBytes(ctx, key, data)
	return err
}

// Get returns the object under key; a missing one wraps backup.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := s.obs.GetBytes(ctx, key)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%s: %w", key, backup.ErrNotFound)
	}
	return b, err
}

// List returns every object whose key starts with prefix, in key order. It reads the
// bucket's whole index (one entry per object).
func (s *Store) List(ctx context.Context, prefix string) ([]backup.Object, error) {
	infos, err := s.obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []backup.Object
	for _, i := range infos {
		if strings.HasPrefix(i.Name, prefix) && !i.Deleted {
			out = append(out, backup.Object{Key: i.Name, Size: int64(i.Size), Modified: i.ModTime})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Key < out[b].Key })
	return out, nil
}

// Delete removes key; a missing key is no error.
func (s *Store) Delete(ctx context.Context, key string) error {
	err := s.obs.Delete(ctx, key)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil
	}
	return err
}
