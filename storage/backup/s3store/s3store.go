// Package s3store is backup.Store on an S3 server (AWS S3, SeaweedFS, MinIO, Ceph RGW, …)
// through minio-go. Every PUT carries the data's MD5 (Content-MD5) and, signed, its
// SHA-256 (x-amz-content-sha256, over http; https sends it unsigned), so the server
// refuses data altered on the way.
package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/cairn-io/cairn/storage/backup"
)

// Config is an S3 remote as Cairn's remote.create records it.
type Config struct {
	// Endpoint is the server's URL (https://s3.example.com, http://127.0.0.1:8333) or
	// host:port (https assumed).
	Endpoint  string
	Bucket    string
	Region    string
	AccessKey string
	SecretKey string
	// PathStyle addresses the bucket in the path (SeaweedFS, MinIO) instead of the host.
	PathStyle bool
}

// Store is a bucket.
type Store struct {
	c      *minio.Client
	bucket string
}

// New returns the store of cfg. It does not contact the server (Check does).
func New(cfg Config) (*Store, error) {
	host, secure, err := parseEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	lookup := minio.BucketLookupDNS
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	c, err := minio.New(host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:       secure,
		Region:       cfg.Region,
		BucketLookup: lookup,
		MaxRetries:   3,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 endpoint %s: %w", cfg.Endpoint, err)
	}
	return &Store{c: c, bucket: cfg.Bucket}, nil
}

func parseEndpoint(e string) (host string, secure bool, err error) {
	if !strings.Contains(e, "://") {
		return e, true, nil
	}
	u, err := url.Parse(e)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
		return "", false, fmt.Errorf("s3 endpoint %q: must be http(s)://host[:port] or host[:port]", e)
	}
	return u.Host, u.Scheme == "https", nil
}

// Check makes sure the bucket exists and the credentials may list it: the first step
// of every backup, so wrong credentials or a missing bucket fail it before anything is
// sent. Errors wrap backup.ErrPermanent for those two.
func (s *Store) Check(ctx context.Context) error {
	ok, err := s.c.BucketExists(ctx, s.bucket)
	if err != nil {
		return classify(err)
	}
	if !ok {
		return fmt.Errorf("bucket %s does not exist: %w", s.bucket, backup.ErrPermanent)
	}
	for o := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: "cairn/", MaxKeys: 1}) {
		if o.Err != nil {
			return classify(o.Err)
		}
		break
	}
	return nil
}

// Put stores data under key with its MD5 for the server to check; sum is the caller's
// SHA-256 of data, checked here before anything is sent.
func (s *Store) Put(ctx context.Context, key string, data []byte, sum [32]byte) error {
	if sha256.Sum256(data) != sum {
		return fmt.Errorf("%s: data does not hash to the SHA-256 given: %w", key, backup.ErrPermanent)
	}
	_, err := s.c.PutObject(ctx, s.bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{
		ContentType:      "application/octet-stream",
		SendContentMd5:   true,
		DisableMultipart: true,
	})
	return classify(err)
}

// Get returns the object under key (backup.ErrNotFound when there is none).
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	o, err := s.c.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, classify(err)
	}
	defer o.Close()
	b, err := io.ReadAll(o)
	if err != nil {
		return nil, classify(err)
	}
	return b, nil
}

// List returns the objects under prefix in key order.
func (s *Store) List(ctx context.Context, prefix string) ([]backup.Object, error) {
	var out []backup.Object
	for o := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, classify(o.Err)
		}
		out = append(out, backup.Object{Key: o.Key, Size: o.Size, Modified: o.LastModified})
	}
	return out, nil
}

// Delete removes key.
func (s *Store) Delete(ctx context.Context, key string) error {
	return classify(s.c.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}))
}

// classify maps S3's error codes: NoSuchKey to backup.ErrNotFound, those no retry
// cures to backup.ErrPermanent; the message names the code.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var r minio.ErrorResponse
	if errors.As(err, &r) {
		switch r.Code {
		case "NoSuchKey":
			return fmt.Errorf("%s: %w", r.Key, backup.ErrNotFound)
		case "NoSuchBucket":
			return fmt.Errorf("bucket %s does not exist (NoSuchBucket): %w", r.BucketName, backup.ErrPermanent)
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidBucketName", "EntityTooLarge", "XAmzContentChecksumMismatch", "BadDigest", "InvalidDigest":
			return fmt.Errorf("%s (%s): %w", r.Message, r.Code, backup.ErrPermanent)
		}
		if r.StatusCode >= 400 && r.StatusCode < 500 && r.StatusCode != http.StatusRequestTimeout && r.StatusCode != http.StatusTooManyRequests {
			// The request itself is refused: sending it again gets the same answer.
			return fmt.Errorf("%s (%s, HTTP %d): %w", r.Message, r.Code, r.StatusCode, backup.ErrPermanent)
		}
		if r.Code != "" {
			return fmt.Errorf("%s (%s, HTTP %d)", r.Message, r.Code, r.StatusCode)
		}
	}
	return err
}
