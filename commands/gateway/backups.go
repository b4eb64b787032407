package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/gateway/linstor"
	"github.com/cairn-io/cairn/commands/resources"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backup"
)

// The backup routes (docs/backups.md): remotes from the views; what is on a remote read
// from the remote itself (a backup exists there once its manifest is written, whichever
// cluster wrote it), so a fresh cluster lists and restores another's backups.
func (g *Gateway) backupRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /cairn/v1/remotes", g.listRemotes)
	if g.Remotes == nil {
		return
	}
	mux.HandleFunc("GET /cairn/v1/remotes/{remote}/backups", g.listBackups)
	mux.HandleFunc("GET /cairn/v1/remotes/{remote}/backups/{resource}/{id}", g.getBackup)
	mux.HandleFunc("POST /cairn/v1/remotes/{remote}/backups/{resource}/{id}/verify", g.verifyBackup)
	mux.HandleFunc("POST /cairn/v1/remotes/{remote}/backups/{resource}/{id}/restore", g.restoreBackup)
	mux.HandleFunc("DELETE /cairn/v1/remotes/{remote}/backups/{resource}/{id}", g.deleteBackup)
}

// RemoteView is a remote as the API shows it: never its secret, only the id of the
// key that sealed it.
type RemoteView struct {
	Name         string `json:"name"`
	Kind         string `json:"kind"`
	Endpoint     string `json:"endpoint"`
	Bucket       string `json:"bucket"`
	Region       string `json:"region,omitempty"`
	PathStyle    bool   `json:"path_style,omitempty"`
	AccessKey    string `json:"access_key"`
	SecretSealed string `json:"secret_key_sealed_with"`
	// Encrypted: the agents encrypt every chunk with the remote's passphrase.
	Encrypted bool `json:"encrypted"`
}

// RemoteViewOf is r without its secret.
func RemoteViewOf(r projections.Remote) RemoteView {
	return RemoteView{Name: r.Name, Kind: r.Kind, Endpoint: r.Endpoint, Bucket: r.Bucket, Region: r.Region,
		PathStyle: r.PathStyle, AccessKey: r.AccessKey, SecretSealed: r.SecretKey.KeyID, Encrypted: r.EncryptionPassphrase != nil}
}

func (g *Gateway) listRemotes(w http.ResponseWriter, r *http.Request) {
	g.withView(w, func(v *projections.View) (any, error) {
		rs, err := v.Remotes()
		out := make([]RemoteView, 0, len(rs))
		for _, x := range rs {
			out = append(out, RemoteViewOf(x))
		}
		return map[string]any{"seq": v.Seq(), "remotes": out}, err
	})
}

// store opens the request's remote; it writes the error and returns nil when it cannot.
func (g *Gateway) store(w http.ResponseWriter, r *http.Request) backup.Store {
	st, err := g.Remotes(r.PathValue("remote"))
	if err != nil {
		writeError(w, err)
		return nil
	}
	return st
}

// BackupSummary is one complete backup on a remote.
type BackupSummary struct {
	Remote    string    `json:"remote"`
	Resource  string    `json:"resource"`
	ID        string    `json:"id"`
	Snapshot  string    `json:"snapshot"`
	Base      string    `json:"base,omitempty"`
	Node      string    `json:"node,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Bytes     int64     `json:"bytes"`
	Volumes   int       `json:"volumes"`
	Chunks    int       `json:"chunks"`
	SHA256    string    `json:"manifest_sha256"`
}

// SummaryOf sums up a listed backup.
func SummaryOf(remote string, l backup.Listed) BackupSummary {
	return BackupSummary{Remote: remote, Resource: l.Resource, ID: l.ID, Snapshot: l.Snapshot, Base: l.Base, Node: l.Node,
		CreatedAt: l.CreatedAt, Bytes: l.Bytes(), Volumes: len(l.Volumes), Chunks: len(l.StoredChunks()), SHA256: l.SHA256}
}

// listBackups lists the complete backups on the remote (?resource= for one
// definition's) and the uploads to it this cluster has under way or saw fail.
func (g *Gateway) listBackups(w http.ResponseWriter, r *http.Request) {
	st := g.store(w, r)
	if st == nil {
		return
	}
	remote, resource := r.PathValue("remote"), r.URL.Query().Get("resource")
	listed, err := backup.List(r.Context(), st, resource)
	if err != nil && len(listed) == 0 {
		writeError(w, linstor.RemoteError(err))
		return
	}
	out := map[string]any{"backups": []BackupSummary{}}
	var sums []BackupSummary
	for _, l := range listed {
		sums = append(sums, SummaryOf(remote, l))
	}
	if sums != nil {
		out["backups"] = sums
	}
	if err != nil {
		out["warning"] = err.Error()
	}
	v, verr := g.DB.Read()
	if verr == nil {
		defer v.Close()
		busy, _ := v.BackupsUnderWay()
		var under []projections.RDBackup
		for _, b := range busy {
			if b.Remote != remote || resource != "" && b.Resource != resource {
				continue
			}
			if rd, ok, _ := v.ResourceDefinition(b.Resource); ok {
				if rb, ok := rd.Backup(remote, b.ID); ok {
					under = append(under, *rb)
				}
			}
		}
		out["uploading"] = nonNil(under)
	}
	writeJSON(w, http.StatusOK, out)
}

func (g *Gateway) manifest(w http.ResponseWriter, r *http.Request, st backup.Store) (backup.Manifest, string, bool) {
	m, sum, err := backup.ReadManifest(r.Context(), st, r.PathValue("resource"), r.PathValue("id"), "")
	if err != nil {
		writeError(w, linstor.RemoteError(err))
		return m, sum, false
	}
	return m, sum, true
}

func (g *Gateway) getBackup(w http.ResponseWriter, r *http.Request) {
	st := g.store(w, r)
	if st == nil {
		return
	}
	if m, sum, ok := g.manifest(w, r, st); ok {
		writeJSON(w, http.StatusOK, SummaryOf(r.PathValue("remote"), backup.Listed{Manifest: m, SHA256: sum}))
	}
}

// verifyBackup reads every chunk of the backup and checks its hash: {ok, bad: {chunk:
// why}, bytes, chunks}.
func (g *Gateway) verifyBackup(w http.ResponseWriter, r *http.Request) {
	st := g.store(w, r)
	if st == nil {
		return
	}
	m, _, ok := g.manifest(w, r, st)
	if !ok {
		return
	}
	bad, p, err := backup.Verify(r.Context(), st, m, nil)
	if err != nil {
		writeError(w, linstor.RemoteError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": len(bad) == 0, "bad": bad, "bytes": p.BytesTotal, "chunks": len(m.StoredChunks())})
}

// RestoreBody is the body of POST …/restore.
type RestoreBody struct {
	Target        string   `json:"target"`
	Nodes         []string `json:"nodes"`
	StoragePool   string   `json:"storage_pool,omitempty"`
	ResourceGroup string   `json:"resource_group,omitempty"`
	// PlaceCount, instead of Nodes: autoplace picks that many nodes.
	PlaceCount int `json:"place_count,omitempty"`
}

// restoreBackup reads the backup's manifest and sends backup.restore with its volumes
// and SHA-256: the new definition's disks are filled from it by their agents.
func (g *Gateway) restoreBackup(w http.ResponseWriter, r *http.Request) {
	var b RestoreBody
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&b); err != nil {
		writeError(w, cairn.Errorf(cairn.CodeInvalidArgument, "restore body: %v", err))
		return
	}
	st := g.store(w, r)
	if st == nil {
		return
	}
	m, sum, ok := g.manifest(w, r, st)
	if !ok {
		return
	}
	c := resources.BackupRestoreOf(r.PathValue("remote"), m, sum)
	c.Target, c.Nodes, c.StoragePool, c.ResourceGroup, c.PlaceCount = b.Target, b.Nodes, b.StoragePool, b.ResourceGroup, b.PlaceCount
	body, _ := json.Marshal(c)
	g.sendAndAnswer(w, r, "backup.restore", body)
}

// deleteBackup sends backup.delete, then removes the manifest and the chunks no other
// backup names (older than backup.ChunkGrace) from the remote.
func (g *Gateway) deleteBackup(w http.ResponseWriter, r *http.Request) {
	st := g.store(w, r)
	if st == nil {
		return
	}
	remote, resource, id := r.PathValue("remote"), r.PathValue("resource"), r.PathValue("id")
	body, _ := json.Marshal(map[string]string{"remote": remote, "resource": resource, "id": id})
	reply, err := g.Send(r.Context(), "backup.delete", body, actorOf(r, "http:"+r.RemoteAddr), nil)
	if err != nil {
		writeError(w, err)
		return
	}
	if !reply.OK {
		writeJSON(w, HTTPStatus(reply.Error.Code), reply)
		return
	}
	removed, err := backup.Delete(r.Context(), st, resource, id, backup.ChunkGrace, time.Now())
	if err != nil {
		writeError(w, linstor.RemoteError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "events": reply.Events, "chunks_removed": removed})
}

// sendAndAnswer sends a command on behalf of the request and writes its reply.
func (g *Gateway) sendAndAnswer(w http.ResponseWriter, r *http.Request, verb string, body []byte) {
	reply, err := g.Send(r.Context(), verb, body, actorOf(r, "http:"+r.RemoteAddr), nil)
	writeReply(w, reply, err)
}
