package admission

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StoredReply is a reply remembered for a command id, with the digest of the request
// that got it (RequestDigest).
type StoredReply struct {
	Digest string `json:"digest"`
	Reply  Reply  `json:"reply"`
}

// ReplyStore keeps the replies of commands that appended nothing (refusals and no-ops)
// where every serve sees them. Accepted commands need none: their events carry the id
// and the request digest, and every serve's views hold them.
type ReplyStore interface {
	// Get returns the reply stored for id; ok is false when there is none (or it expired).
	Get(ctx context.Context, id string) (r StoredReply, ok bool, err error)
	// Put stores a reply for id unless one is there already (the first reply wins).
	Put(ctx context.Context, id string, r StoredReply) error
}

// DefaultReplyTTL is how long a refusal is remembered for retries with its command id.
const DefaultReplyTTL = 15 * time.Minute

// ReplyKV is a ReplyStore in a JetStream key-value bucket whose entries expire after
// their TTL (the bucket's MaxAge). Keys are the hex of the command id (ids may hold
// ':', which keys may not).
type ReplyKV struct{ kv jetstream.KeyValue }

// NewReplyKV creates or updates the bucket (replicas like the streams).
func NewReplyKV(ctx context.Context, js jetstream.JetStream, bucket string, ttl time.Duration, replicas int) (*ReplyKV, error) {
	if ttl <= 0 {
		ttl = DefaultReplyTTL
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, History: 1, TTL: ttl,
		Replicas: max(replicas, 1), Description: "cairn: replies of commands that appended nothing, by command id"})
	if err != nil {
		return nil, fmt.Errorf("reply bucket %s: %w", bucket, err)
	}
	return &ReplyKV{kv: kv}, nil
}

// Get implements ReplyStore.
func (s *ReplyKV) Get(ctx context.Context, id string) (StoredReply, bool, error) {
	e, err := s.kv.Get(ctx, hex.EncodeToString([]byte(id)))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return StoredReply{}, false, nil
	}
	if err != nil {
		return StoredReply{}, false, err
	}
	var r StoredReply
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return StoredReply{}, false, fmt.Errorf("stored reply of %s: %w", id, err)
	}
	return r, true, nil
}

// Put implements ReplyStore.
func (s *ReplyKV) Put(ctx context.Context, id string, r StoredReply) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = s.kv.Create(ctx, hex.EncodeToString([]byte(id)), b)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil
	}
	return err
}
