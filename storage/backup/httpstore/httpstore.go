// Package httpstore is the backup format's Store (storage/backup) on another Cairn
// cluster's HTTP API: the store of a remote of kind cairn. Backups shipped to that
// cluster (backup.ship, backup.create) land in its received store
// (/cairn/v1/received/objects/<key>, package objstore behind it), from where that
// cluster restores them.
//
// Errors: a GET of a missing object wraps backup.ErrNotFound; a token refused (401,
// 403), an object refused (400, 413, 422) or a target without a received store (404
// on the check) wrap backup.ErrPermanent; a network error or a 5xx is left to be
// tried again.
package httpstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cairn-io/cairn/storage/backup"
)

// Config is a cluster remote's access.
type Config struct {
	// URL is the other cluster's HTTP API, http(s)://host[:port].
	URL string `json:"url"`
	// Token is an API token of that cluster with the operator role ("" when its API
	// needs none).
	Token string `json:"token,omitempty"`
}

// SumHeader carries an object's SHA-256 (hex) on a PUT; the receiving serve refuses a
// body that does not match it.
const SumHeader = "X-Cairn-Sha256"

// ObjectsPath is where the received store's objects are served.
const ObjectsPath = "/cairn/v1/received/objects"

// Store is a backup.Store on another cluster's received store.
type Store struct {
	cfg  Config
	http *http.Client
}

// New returns the Store of cfg; client nil: a client with a 2-minute timeout.
func New(cfg Config, client *http.Client) (*Store, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%w: cluster remote URL %q is not http(s)://host[:port]", backup.ErrPermanent, cfg.URL)
	}
	cfg.URL = strings.TrimSuffix(cfg.URL, "/")
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Minute}
	}
	return &Store{cfg: cfg, http: client}, nil
}

// Object is one listed object as the received store's list answers it.
type Object struct {
	Key      string    `json:"key"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// ListReply is the answer of GET ObjectsPath?prefix=P.
type ListReply struct {
	Objects []Object `json:"objects"`
}

func (s *Store) do(ctx context.Context, method, path string, body []byte, hdr http.Header) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.cfg.URL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if s.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.Token)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, s.cfg.URL+path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, s.cfg.URL+path, err)
	}
	if resp.StatusCode/100 == 2 {
		return out, nil
	}
	why := fmt.Sprintf("%s %s: %s: %s", method, s.cfg.URL+path, resp.Status, strings.TrimSpace(string(out)))
	switch resp.StatusCode {
	case http.StatusNotFound:
		return nil, fmt.Errorf("%s: %w", why, backup.ErrNotFound)
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, fmt.Errorf("%w: the cluster refused the remote's token (it needs a token with the operator role): %s", backup.ErrPermanent, why)
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return nil, fmt.Errorf("%w: %s", backup.ErrPermanent, why)
	}
	return nil, refused(resp.StatusCode, why)
}

func objectPath(key string) string { return ObjectsPath + "/" + (&url.URL{Path: key}).EscapedPath() }

// Check asks the other cluster whether its received store answers and takes the
// token: an error wrapping ErrPermanent when it does not (a wrong token, no such API).
func (s *Store) Check(ctx context.Context) error {
	_, err := s.do(ctx, http.MethodGet, ObjectsPath+"?prefix=cairn/check/", nil, nil)
	if errors.Is(err, backup.ErrNotFound) {
		return fmt.Errorf("%w: %s serves no received store (not a Cairn cluster?): %v", backup.ErrPermanent, s.cfg.URL, err)
	}
	return err
}

// Put sends data with its SHA-256; the other cluster checks it.
func (s *Store) Put(ctx context.Context, key string, data []byte, sum [32]byte) error {
	_, err := s.do(ctx, http.MethodPut, objectPath(key), data, http.Header{SumHeader: {hex.EncodeToString(sum[:])},
		"Content-Type": {"application/octet-stream"}})
	return err
}

// Get returns the object under key.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	return s.do(ctx, http.MethodGet, objectPath(key), nil, nil)
}

// List returns the objects whose key starts with prefix, in key order.
func (s *Store) List(ctx context.Context, prefix string) ([]backup.Object, error) {
	b, err := s.do(ctx, http.MethodGet, ObjectsPath+"?prefix="+url.QueryEscape(prefix), nil, nil)
	if err != nil {
		return nil, err
	}
	var r ListReply
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	out := make([]backup.Object, 0, len(r.Objects))
	for _, o := range r.Objects {
		out = append(out, backup.Object{Key: o.Key, Size: o.Size, Modified: o.Modified})
	}
	return out, nil
}

// Delete removes key; a missing key is no error.
func (s *Store) Delete(ctx context.Context, key string) error {
	_, err := s.do(ctx, http.MethodDelete, objectPath(key), nil, nil)
	if errors.Is(err, backup.ErrNotFound) {
		return nil
	}
	return err
}
