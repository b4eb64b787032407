package httpstore

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/cairn-io/cairn/storage/backup"
)

// RestoreRequest asks the other cluster to restore a backup of its received store
// into definition Target: on Nodes, or on PlaceCount nodes its autoplace picks.
type RestoreRequest struct {
	Target        string   `json:"target"`
	Nodes         []string `json:"nodes,omitempty"`
	StoragePool   string   `json:"storage_pool,omitempty"`
	ResourceGroup string   `json:"resource_group,omitempty"`
	PlaceCount    int      `json:"place_count,omitempty"`
}

// Restore asks the other cluster to restore backup id of resource from its received
// store (POST /cairn/v1/remotes/received/backups/{resource}/{id}/restore). answered is
// false when the cluster could not be reached or failed (a network error, a 5xx):
// ask again later. answered with a nil error: the target definition exists there,
// restored from this backup (also when an earlier ask made it and its answer was
// lost). answered with an error: the cluster refused, and why.
func (s *Store) Restore(ctx context.Context, resource, id string, req RestoreRequest) (answered bool, err error) {
	body, _ := json.Marshal(req)
	path := "/cairn/v1/remotes/received/backups/" + url.PathEscape(resource) + "/" + url.PathEscape(id) + "/restore"
	_, err = s.do(ctx, http.MethodPost, path, body, http.Header{"Content-Type": {"application/json"}})
	var refused *refusal
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &refused) && refused.status == http.StatusConflict && s.restoredFrom(ctx, req.Target, resource, id):
		return true, nil
	case errors.As(err, &refused) || errors.Is(err, backup.ErrPermanent) || errors.Is(err, backup.ErrNotFound):
		return true, err
	}
	return false, err
}

// restoredFrom reports whether definition target on the other cluster was restored
// from backup id of resource of its received store.
func (s *Store) restoredFrom(ctx context.Context, target, resource, id string) bool {
	b, err := s.do(ctx, http.MethodGet, "/cairn/v1/resources/"+url.PathEscape(target), nil, nil)
	if err != nil {
		return false
	}
	var rd struct {
		From *struct {
			Remote   string `json:"remote"`
			Resource string `json:"resource"`
			ID       string `json:"id"`
		} `json:"restored_from_backup"`
	}
	return json.Unmarshal(b, &rd) == nil && rd.From != nil && rd.From.Remote == "received" && rd.From.Resource == resource && rd.From.ID == id
}

// refusal is a 4xx answer other than those do classifies.
type refusal struct {
	status int
	why    string
}

func (r *refusal) Error() string { return r.why }

func refused(status int, why string) error {
	if status/100 == 4 {
		return &refusal{status: status, why: why}
	}
	return errors.New(why)
}
