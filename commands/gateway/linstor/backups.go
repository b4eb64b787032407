package linstor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/resources"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backup"
)

// LINSTOR's remotes and backups (docs/backups.md, "The LINSTOR CLI"): S3 remotes map to
// remote.create/remote.delete; backup create takes a snapshot (snap_name, or
// back_YYYYMMDD_HHMMSS as LINSTOR names it), waits until it is taken and sends
// backup.create; list, info, restore and delete read the remote's manifests. A backup's
// LINSTOR id is "<resource>_<backup id>" (LINSTOR's "<rsc>_<snapshot>"), resolved against
// the remote's list.

const (
	objRemote   uint64 = 0x040000 // MASK_REMOTE
	objBackup   uint64 = 0x080000 // MASK_BACKUP
	objSchedule uint64 = 0x540000 // MASK_SCHEDULE

	codeNotFoundRemote   uint64 = 321
	codeNotFoundBackup   uint64 = 322
	codeNotFoundSchedule uint64 = 323
	codeExistsRemote     uint64 = 527
	codeExistsSchedule   uint64 = 528
)

func init() {
	notFoundCodes[objRemote], notFoundCodes[objBackup], notFoundCodes[objSchedule] = codeNotFoundRemote, codeNotFoundBackup, codeNotFoundSchedule
	existsCodes[objRemote], existsCodes[objSchedule] = codeExistsRemote, codeExistsSchedule
}

// S3Remote is LINSTOR's S3 remote (the secret key only ever comes in).
type S3Remote struct {
	RemoteName   string `json:"remote_name"`
	Endpoint     string `json:"endpoint"`
	Bucket       string `json:"bucket"`
	Region       string `json:"region"`
	AccessKey    string `json:"access_key,omitempty"`
	SecretKey    string `json:"secret_key,omitempty"`
	UsePathStyle bool   `json:"use_path_style"`
}

func s3RemoteOf(r projections.Remote) S3Remote {
	return S3Remote{RemoteName: r.Name, Endpoint: r.Endpoint, Bucket: r.Bucket, Region: r.Region, AccessKey: r.AccessKey, UsePathStyle: r.PathStyle}
}

func (a *API) backupRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/remotes", a.listRemotes)
	mux.HandleFunc("GET /v1/remotes/s3", a.listS3Remotes)
	mux.HandleFunc("POST /v1/remotes/s3", a.createS3Remote)
	mux.HandleFunc("PUT /v1/remotes/s3/{name}", a.modifyS3Remote)
	mux.HandleFunc("DELETE /v1/remotes", a.deleteRemote)
	mux.HandleFunc("GET /v1/remotes/linstor", a.listLinstorRemotes)
	mux.HandleFunc("POST /v1/remotes/linstor", a.createLinstorRemote)
	mux.HandleFunc("PUT /v1/remotes/linstor/{name}", a.modifyLinstorRemote)
	mux.HandleFunc("GET /v1/remotes/ebs", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, []any{}) })
	if a.Remotes == nil {
		return
	}
	mux.HandleFunc("POST /v1/remotes/{remote}/backups", a.createBackup)
	mux.HandleFunc("GET /v1/remotes/{remote}/backups", a.listBackups)
	mux.HandleFunc("DELETE /v1/remotes/{remote}/backups", a.deleteBackups)
	mux.HandleFunc("POST /v1/remotes/{remote}/backups/restore", a.restoreBackup)
	mux.HandleFunc("POST /v1/remotes/{remote}/backups/info", a.backupInfo)
	mux.HandleFunc("POST /v1/remotes/{remote}/backups/abort", a.abortBackup)
	mux.HandleFunc("POST /v1/remotes/{remote}/backups/ship", a.shipBackup)
}

// listRemotes answers the object the clients decode (golinstor client/remote.go
// GetAll, the Python client's RemoteListResponse), not the OpenAPI document's array.
func (a *API) listRemotes(w http.ResponseWriter, r *http.Request) {
	a.withView(w, objRemote, func(v *projections.View) (any, error) {
		s3, err := s3Remotes(v)
		if err != nil {
			return nil, err
		}
		ls, err := linstorRemotes(v)
		return map[string]any{"s3_remotes": s3, "linstor_remotes": ls, "ebs_remotes": []any{}}, err
	})
}

func (a *API) listS3Remotes(w http.ResponseWriter, r *http.Request) {
	a.withView(w, objRemote, func(v *projections.View) (any, error) { return s3Remotes(v) })
}

// s3Remotes are the remotes as LINSTOR shows them (never the secret key).
func s3Remotes(v *projections.View) ([]S3Remote, error) {
	rs, err := v.Remotes()
	out := []S3Remote{}
	for _, x := range rs {
		if x.Kind == events.RemoteS3 {
			out = append(out, s3RemoteOf(x))
		}
	}
	return out, err
}

// LinstorRemote is LINSTOR's remote that is another cluster: a Cairn remote of kind
// cairn. Its passphrase only ever comes in: Cairn takes it as the other cluster's API
// token. ClusterID is LINSTOR's check of the target's identity; Cairn keeps none.
type LinstorRemote struct {
	RemoteName string `json:"remote_name"`
	URL        string `json:"url"`
	Passphrase string `json:"passphrase,omitempty"`
	ClusterID  string `json:"cluster_id,omitempty"`
}

func linstorRemotes(v *projections.View) ([]LinstorRemote, error) {
	rs, err := v.Remotes()
	out := []LinstorRemote{}
	for _, x := range rs {
		if x.Kind == events.RemoteCairn {
			out = append(out, LinstorRemote{RemoteName: x.Name, URL: x.Endpoint})
		}
	}
	return out, err
}

func (a *API) listLinstorRemotes(w http.ResponseWriter, r *http.Request) {
	a.withView(w, objRemote, func(v *projections.View) (any, error) { return linstorRemotes(v) })
}

func (a *API) createLinstorRemote(w http.ResponseWriter, r *http.Request) {
	w = createdAs200{w}
	var in LinstorRemote
	if !readBody(w, r, &in) {
		return
	}
	body := map[string]any{"name": in.RemoteName, "kind": events.RemoteCairn, "endpoint": in.URL}
	if in.Passphrase != "" {
		body["token"] = in.Passphrase
	}
	a.commit(w, r, "remote.create", body, opCreate, objRemote,
		fmt.Sprintf("Remote '%s' created.", in.RemoteName), map[string]string{"RemoteName": in.RemoteName})
}

func (a *API) modifyLinstorRemote(w http.ResponseWriter, r *http.Request) {
	var in struct {
		URL        *string `json:"url"`
		Passphrase *string `json:"passphrase"`
	}
	if !readBody(w, r, &in) {
		return
	}
	name := r.PathValue("name")
	body := map[string]any{"name": name}
	if in.URL != nil {
		body["endpoint"] = *in.URL
	}
	if in.Passphrase != nil {
		body["token"] = *in.Passphrase
	}
	a.commit(w, r, "remote.modify", body, opModify, objRemote, fmt.Sprintf("Remote '%s' modified.", name), map[string]string{"RemoteName": name})
}

// createdAs200 answers a create's success with 200, where LINSTOR's OpenAPI document
// declares 200 rather than 201 (remotes, backups, ships).
type createdAs200 struct{ http.ResponseWriter }

func (c createdAs200) WriteHeader(code int) {
	if code == http.StatusCreated {
		code = http.StatusOK
	}
	c.ResponseWriter.WriteHeader(code)
}

func (a *API) createS3Remote(w http.ResponseWriter, r *http.Request) {
	w = createdAs200{w}
	var in S3Remote
	if !readBody(w, r, &in) {
		return
	}
	a.commit(w, r, "remote.create", map[string]any{"name": in.RemoteName, "kind": "s3", "endpoint": in.Endpoint, "bucket": in.Bucket,
		"region": in.Region, "path_style": in.UsePathStyle, "access_key": in.AccessKey, "secret_key": in.SecretKey}, opCreate, objRemote,
		fmt.Sprintf("Remote '%s' created.", in.RemoteName), map[string]string{"RemoteName": in.RemoteName})
}

// modifyS3Remote maps LINSTOR's remote modify s3 (the fields sent change) to
// remote.modify.
func (a *API) modifyS3Remote(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Endpoint     *string `json:"endpoint"`
		Bucket       *string `json:"bucket"`
		Region       *string `json:"region"`
		AccessKey    *string `json:"access_key"`
		SecretKey    *string `json:"secret_key"`
		UsePathStyle *bool   `json:"use_path_style"`
	}
	if !readBody(w, r, &in) {
		return
	}
	name := r.PathValue("name")
	body := map[string]any{"name": name}
	for k, v := range map[string]*string{"endpoint": in.Endpoint, "bucket": in.Bucket, "region": in.Region, "access_key": in.AccessKey, "secret_key": in.SecretKey} {
		if v != nil {
			body[k] = *v
		}
	}
	if in.UsePathStyle != nil {
		body["path_style"] = *in.UsePathStyle
	}
	a.commit(w, r, "remote.modify", body, opModify, objRemote, fmt.Sprintf("Remote '%s' modified.", name), map[string]string{"RemoteName": name})
}

func (a *API) deleteRemote(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("remote_name")
	a.commit(w, r, "remote.delete", map[string]any{"name": name}, opDelete, objRemote,
		fmt.Sprintf("Remote '%s' deleted.", name), map[string]string{"RemoteName": name})
}

// backupIn is LINSTOR's BackupCreate.
type backupIn struct {
	RscName     string `json:"rsc_name"`
	NodeName    string `json:"node_name"`
	SnapName    string `json:"snap_name"`
	Incremental *bool  `json:"incremental"`
}

// createBackup takes the snapshot, waits until it is taken (SnapshotWait) and starts
// the upload; like LINSTOR it answers once the upload started, not finished.
func (a *API) createBackup(w http.ResponseWriter, r *http.Request) {
	w = createdAs200{w}
	var in backupIn
	if !readBody(w, r, &in) {
		return
	}
	remote := r.PathValue("remote")
	snap, ok := a.takeBackupSnapshot(w, r, in.RscName, in.SnapName, "back_")
	if !ok {
		return
	}
	body := map[string]any{"resource": in.RscName, "remote": remote, "snapshot": snap, "full": in.Incremental != nil && !*in.Incremental}
	if in.NodeName != "" {
		body["node"] = in.NodeName
	}
	a.commit(w, r, "backup.create", body, opCreate, objBackup,
		fmt.Sprintf("Backup shipping of resource '%s' to remote '%s' started (snapshot '%s').", in.RscName, remote, snap),
		map[string]string{"RscDfn": in.RscName, "SnapshotName": snap})
}

// takeBackupSnapshot takes snapshot snap of rd (prefix and the time when snap is "", as
// LINSTOR names them) and waits until it is taken; it writes the failure and answers
// false when it is not.
func (a *API) takeBackupSnapshot(w http.ResponseWriter, r *http.Request, rd, snap, prefix string) (string, bool) {
	if snap == "" {
		snap = prefix + time.Now().UTC().Format("20060102_150405")
	}
	if _, err := a.command(r, "rd.snapshot", map[string]any{"resource": rd, "name": snap}); err != nil {
		writeFailure(w, opCreate, objBackup, err)
		return "", false
	}
	if err := a.waitTaken(r.Context(), rd, snap, time.Now().Add(SnapshotWait)); err != nil {
		writeFailure(w, opCreate, objBackup, err)
		return "", false
	}
	return snap, true
}

// shipIn is LINSTOR's BackupShip (linstorapi.py backup_ship).
type shipIn struct {
	SrcRscName       string            `json:"src_rsc_name"`
	DstRscName       string            `json:"dst_rsc_name"`
	SrcNodeName      string            `json:"src_node_name"`
	DstNodeName      string            `json:"dst_node_name"`
	DstNetIfName     string            `json:"dst_net_if_name"`
	DstStorPool      string            `json:"dst_stor_pool"`
	StorPoolRename   map[string]string `json:"stor_pool_rename"`
	DownloadOnly     bool              `json:"download_only"`
	ForceRestore     bool              `json:"force_restore"`
	DstRscGrp        string            `json:"dst_rsc_grp"`
	ForceMvRscGrp    bool              `json:"force_mv_rsc_grp"`
	AllowIncremental *bool             `json:"allow_incremental"`
	SrcSnapName      string            `json:"src_snap_name"`
}

// shipBackup maps LINSTOR's backup ship: the snapshot (src_snap_name, else
// ship_YYYYMMDD_HHMMSS) taken and waited for, then backup.ship to the cluster remote,
// restored there into dst_rsc_name on dst_node_name (else one node the target picks);
// --download-only sends backup.create (the target keeps the backup, restores nothing).
// A target that exists is refused by the target (Cairn restores into a new definition
// only), so --force-restore is refused here.
func (a *API) shipBackup(w http.ResponseWriter, r *http.Request) {
	w = createdAs200{w}
	var in shipIn
	if !readBody(w, r, &in) {
		return
	}
	if in.ForceRestore {
		writeFailure(w, opCreate, objBackup, cairn.InvalidField("force_restore", "Cairn restores a shipped backup into a new definition only; delete the target's definition first"))
		return
	}
	pool := in.DstStorPool
	if pool == "" && len(in.StorPoolRename) == 1 {
		for _, p := range in.StorPoolRename {
			pool = p
		}
	}
	remote := r.PathValue("remote")
	snap, ok := a.takeBackupSnapshot(w, r, in.SrcRscName, in.SrcSnapName, "ship_")
	if !ok {
		return
	}
	body := map[string]any{"resource": in.SrcRscName, "remote": remote, "snapshot": snap, "full": in.AllowIncremental != nil && !*in.AllowIncremental}
	if in.SrcNodeName != "" {
		body["node"] = in.SrcNodeName
	}
	verb := "backup.create"
	if !in.DownloadOnly {
		verb, body["target"] = "backup.ship", in.DstRscName
		if in.DstNodeName != "" {
			body["target_nodes"] = []string{in.DstNodeName}
		}
		if pool != "" {
			body["target_storage_pool"] = pool
		}
		if in.DstRscGrp != "" {
			body["target_resource_group"] = in.DstRscGrp
		}
	}
	a.commit(w, r, verb, body, opCreate, objBackup,
		fmt.Sprintf("Backup shipping of resource '%s' to remote '%s' started (snapshot '%s', target '%s').", in.SrcRscName, remote, snap, in.DstRscName),
		map[string]string{"RscDfn": in.SrcRscName, "SnapshotName": snap})
}

// waitTaken waits until snapshot snap of rd is taken; an error when it failed, is gone
// or is still under way at deadline.
func (a *API) waitTaken(ctx context.Context, rd, snap string, deadline time.Time) error {
	for {
		def, err := a.definitionNow(rd)
		if err != nil {
			return err
		}
		s, ok := def.Snapshot(snap)
		switch {
		case !ok:
			return cairn.Errorf(cairn.CodeNotFound, "snapshot %s of %s is gone", snap, rd).About(cairn.ObjSnapshot)
		case s.Phase == projections.SnapshotTaken:
			return nil
		case s.Phase == projections.SnapshotFailed:
			return cairn.Errorf(cairn.CodePreconditionFailed, "snapshot %s of %s failed: %s", snap, rd, s.Reason)
		case time.Now().After(deadline) || ctx.Err() != nil:
			return cairn.Errorf(cairn.CodeUnavailable, "snapshot %s of %s is still %s after %s", snap, rd, s.Phase, SnapshotWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Backup is LINSTOR's Backup.
type Backup struct {
	ID                string `json:"id"`
	StartTime         string `json:"start_time,omitempty"`
	StartTimestamp    int64  `json:"start_timestamp,omitempty"`
	FinishedTime      string `json:"finished_time,omitempty"`
	FinishedTimestamp int64  `json:"finished_timestamp,omitempty"`
	OriginRsc         string `json:"origin_rsc"`
	OriginSnap        string `json:"origin_snap"`
	OriginNode        string `json:"origin_node,omitempty"`
	FailMessages      string `json:"fail_messages,omitempty"`
	Vlms              []any  `json:"vlms"`
	Success           bool   `json:"success"`
	Shipping          bool   `json:"shipping"`
	Restorable        bool   `json:"restorable"`
	BasedOnID         string `json:"based_on_id,omitempty"`
}

// linstorID is a backup's LINSTOR id.
func linstorID(resource, id string) string { return resource + "_" + id }

func (a *API) store(w http.ResponseWriter, r *http.Request, op uint64) backup.Store {
	st, err := a.Remotes(r.PathValue("remote"))
	if err != nil {
		writeFailure(w, op, objRemote, err)
		return nil
	}
	return st
}

// RemoteError is a store's error as a Cairn error: not_found (no such backup),
// precondition_failed for one a retry does not cure (credentials, bucket), unavailable
// otherwise.
func RemoteError(err error) error {
	switch {
	case errors.Is(err, backup.ErrNotFound):
		return cairn.Errorf(cairn.CodeNotFound, "%v", err).About(cairn.ObjBackup)
	case errors.Is(err, backup.ErrPermanent):
		return cairn.Errorf(cairn.CodePreconditionFailed, "%v", err)
	case errors.As(err, new(*cairn.Error)):
		return err
	}
	return cairn.Errorf(cairn.CodeUnavailable, "remote: %v", err)
}

// listBackups answers LINSTOR's BackupList: every complete backup on the remote, and
// the uploads to it under way here (shipping).
func (a *API) listBackups(w http.ResponseWriter, r *http.Request) {
	st := a.store(w, r, 0)
	if st == nil {
		return
	}
	remote, rsc, snap := r.PathValue("remote"), r.URL.Query().Get("rsc_name"), r.URL.Query().Get("snap_name")
	listed, err := backup.List(r.Context(), st, rsc)
	if err != nil && len(listed) == 0 {
		writeFailure(w, 0, objBackup, RemoteError(err))
		return
	}
	out := map[string]Backup{}
	for _, l := range listed {
		if snap != "" && l.Snapshot != snap {
			continue
		}
		b := Backup{ID: linstorID(l.Resource, l.ID), StartTime: l.CreatedAt.Format(time.RFC3339), StartTimestamp: l.CreatedAt.UnixMilli(),
			FinishedTime: l.CreatedAt.Format(time.RFC3339), FinishedTimestamp: l.CreatedAt.UnixMilli(),
			OriginRsc: l.Resource, OriginSnap: l.Snapshot, OriginNode: l.Node, Success: true, Restorable: true, Vlms: []any{}}
		for _, v := range l.Volumes {
			b.Vlms = append(b.Vlms, map[string]any{"vlm_nr": v.Number, "s3": map[string]string{"key": backup.ManifestKey(l.Resource, l.ID)}})
		}
		if l.Base != "" {
			b.BasedOnID = linstorID(l.Resource, l.Base) + ".meta" // the CLI cuts 5 characters off
		}
		out[b.ID] = b
	}
	_ = a.read(func(v *projections.View) error {
		busy, err := v.BackupsUnderWay()
		for _, u := range busy {
			if u.Remote != remote || rsc != "" && u.Resource != rsc {
				continue
			}
			rd, ok, _ := v.ResourceDefinition(u.Resource)
			if !ok {
				continue
			}
			if b, ok := rd.Backup(remote, u.ID); ok && (snap == "" || b.Snapshot == snap) {
				out[linstorID(u.Resource, u.ID)] = Backup{ID: linstorID(u.Resource, u.ID), StartTime: b.StartedAt.Format(time.RFC3339),
					StartTimestamp: b.StartedAt.UnixMilli(), OriginRsc: u.Resource, OriginSnap: b.Snapshot, OriginNode: b.Node, Shipping: true, Vlms: []any{}}
			}
		}
		return err
	})
	writeJSON(w, http.StatusOK, map[string]any{"linstor": out, "other": map[string]any{"files": []string{}}})
}

// find resolves a LINSTOR backup id, or the latest backup of a resource (and snapshot),
// among the remote's complete backups.
func find(listed []backup.Listed, id, rsc, snap string) (backup.Listed, error) {
	var best *backup.Listed
	for i := range listed {
		l := &listed[i]
		switch {
		case id != "" && linstorID(l.Resource, l.ID) == id:
			return *l, nil
		case id == "" && l.Resource == rsc && (snap == "" || l.Snapshot == snap):
			if best == nil || l.CreatedAt.After(best.CreatedAt) {
				best = l
			}
		}
	}
	if best == nil {
		what := "backup " + id
		if id == "" {
			what = "a backup of resource " + rsc
			if snap != "" {
				what += " snapshot " + snap
			}
		}
		return backup.Listed{}, cairn.Errorf(cairn.CodeNotFound, "the remote holds no %s", what).About(cairn.ObjBackup)
	}
	return *best, nil
}

// restoreIn is LINSTOR's BackupRestore (and BackupInfoRequest).
type restoreIn struct {
	SrcRscName    string            `json:"src_rsc_name"`
	SrcSnapName   string            `json:"src_snap_name"`
	LastBackup    string            `json:"last_backup"`
	StorPoolMap   map[string]string `json:"stor_pool_map"`
	TargetRscName string            `json:"target_rsc_name"`
	NodeName      string            `json:"node_name"`
	DownloadOnly  bool              `json:"download_only"`
	DstRscGrp     string            `json:"dst_rsc_grp"`
}

// pool is the storage pool a restore lands in: the one every source pool maps to.
func (in restoreIn) pool() string {
	var pools []string
	for _, p := range in.StorPoolMap {
		if !slices.Contains(pools, p) {
			pools = append(pools, p)
		}
	}
	if len(pools) == 1 {
		return pools[0]
	}
	return ""
}

// restoreBackup restores a backup (last_backup, or the latest of src_rsc_name) into
// the new definition target_rsc_name on node_name.
func (a *API) restoreBackup(w http.ResponseWriter, r *http.Request) {
	var in restoreIn
	if !readBody(w, r, &in) {
		return
	}
	if in.DownloadOnly {
		writeFailure(w, opCreate, objBackup, cairn.InvalidField("download_only", "Cairn restores a backup into a new definition at once; download_only is not served"))
		return
	}
	st := a.store(w, r, opCreate)
	if st == nil {
		return
	}
	listed, err := backup.List(r.Context(), st, in.SrcRscName)
	if err != nil && len(listed) == 0 {
		writeFailure(w, opCreate, objBackup, RemoteError(err))
		return
	}
	l, err := find(listed, in.LastBackup, in.SrcRscName, in.SrcSnapName)
	if err != nil {
		writeFailure(w, opCreate, objBackup, err)
		return
	}
	c := resources.BackupRestoreOf(r.PathValue("remote"), l.Manifest, l.SHA256)
	c.Target, c.Nodes, c.StoragePool, c.ResourceGroup = in.TargetRscName, []string{in.NodeName}, in.pool(), in.DstRscGrp
	a.commit(w, r, "backup.restore", c, opCreate, objBackup,
		fmt.Sprintf("Restoring backup '%s' into resource '%s' on node '%s'.", linstorID(l.Resource, l.ID), in.TargetRscName, in.NodeName),
		map[string]string{"RscDfn": in.TargetRscName})
}

// backupInfo answers LINSTOR's BackupInfo of the backup a restore would take.
func (a *API) backupInfo(w http.ResponseWriter, r *http.Request) {
	var in restoreIn
	if !readBody(w, r, &in) {
		return
	}
	st := a.store(w, r, 0)
	if st == nil {
		return
	}
	listed, err := backup.List(r.Context(), st, in.SrcRscName)
	if err != nil && len(listed) == 0 {
		writeFailure(w, 0, objBackup, RemoteError(err))
		return
	}
	l, err := find(listed, in.LastBackup, in.SrcRscName, in.SrcSnapName)
	if err != nil {
		writeFailure(w, 0, objBackup, err)
		return
	}
	full, count := l.ID, 0
	for base := l.Base; base != ""; count++ { // the chain to the full backup
		full = base
		b, err := find(listed, linstorID(l.Resource, base), "", "")
		if err != nil {
			break
		}
		base = b.Base
	}
	sizeKiB := l.Bytes() / 1024
	writeJSON(w, http.StatusOK, map[string]any{"rsc": l.Resource, "snap": l.Snapshot, "full": linstorID(l.Resource, full),
		"latest": linstorID(l.Resource, l.ID), "count": count + 1, "dl_size_kib": sizeKiB, "alloc_size_kib": sizeKiB, "storpools": []any{}})
}

// deleteBackups deletes the backups a LINSTOR filter names (id, id_prefix,
// resource_name, all): backup.delete for each, then its manifest and unreferenced
// chunks from the remote.
func (a *API) deleteBackups(w http.ResponseWriter, r *http.Request) {
	st := a.store(w, r, opDelete)
	if st == nil {
		return
	}
	q := r.URL.Query()
	listed, err := backup.List(r.Context(), st, q.Get("resource_name"))
	if err != nil && len(listed) == 0 {
		writeFailure(w, opDelete, objBackup, RemoteError(err))
		return
	}
	var doomed []backup.Listed
	for _, l := range listed {
		id := linstorID(l.Resource, l.ID)
		if q.Get("id") != "" && id == q.Get("id") || q.Get("id_prefix") != "" && strings.HasPrefix(id, q.Get("id_prefix")) ||
			q.Get("resource_name") != "" && q.Get("id") == "" && q.Get("id_prefix") == "" || q.Get("all") == "True" || q.Get("all") == "true" {
			doomed = append(doomed, l)
		}
	}
	if len(doomed) == 0 {
		e := rc(maskWarn, opDelete, objBackup, codeWarnNotFound, "No backup on the remote matches.")
		writeResults(w, []ApiCallRc{e})
		return
	}
	// Incremental ones first: a base is refused while a backup based on it uploads.
	sort.SliceStable(doomed, func(i, j int) bool { return doomed[i].CreatedAt.After(doomed[j].CreatedAt) })
	var rcs []ApiCallRc
	remote := r.PathValue("remote")
	for _, l := range doomed {
		if _, err := a.command(r, "backup.delete", map[string]any{"remote": remote, "resource": l.Resource, "id": l.ID}); err != nil {
			writeFailure(w, opDelete, objBackup, err)
			return
		}
		if _, err := backup.Delete(r.Context(), st, l.Resource, l.ID, backup.ChunkGrace, time.Now()); err != nil {
			writeFailure(w, opDelete, objBackup, RemoteError(err))
			return
		}
		rcs = append(rcs, success(opDelete, objBackup, fmt.Sprintf("Backup '%s' deleted from remote '%s'.", linstorID(l.Resource, l.ID), remote),
			map[string]string{"RemoteName": remote}))
	}
	writeResults(w, rcs)
}

// abortBackup stops the uploads of rsc_name under way (backup.abort each).
func (a *API) abortBackup(w http.ResponseWriter, r *http.Request) {
	var in struct {
		RscName string `json:"rsc_name"`
	}
	if !readBody(w, r, &in) {
		return
	}
	remote := r.PathValue("remote")
	def, err := a.definitionNow(in.RscName)
	if err != nil {
		writeFailure(w, opDelete, objBackup, err)
		return
	}
	var rcs []ApiCallRc
	for _, b := range def.Backups {
		if b.Remote != remote || b.Phase != projections.BackupUploading {
			continue
		}
		if _, err := a.command(r, "backup.abort", map[string]any{"resource": in.RscName, "id": b.ID}); err != nil {
			writeFailure(w, opDelete, objBackup, err)
			return
		}
		rcs = append(rcs, success(opDelete, objBackup, fmt.Sprintf("Backup shipping of '%s' aborted.", linstorID(in.RscName, b.ID)), nil))
	}
	if len(rcs) == 0 {
		rcs = append(rcs, rc(maskWarn, opDelete, objBackup, codeWarnNotFound, "No backup of resource '"+in.RscName+"' is shipping to remote '"+remote+"'."))
	}
	writeResults(w, rcs)
}

// ScheduleOut is LINSTOR's Schedule.
type ScheduleOut struct {
	ScheduleName string `json:"schedule_name"`
	FullCron     string `json:"full_cron"`
	IncCron      string `json:"inc_cron,omitempty"`
	KeepLocal    *int   `json:"keep_local,omitempty"`
	KeepRemote   *int   `json:"keep_remote,omitempty"`
	OnFailure    string `json:"on_failure,omitempty"`
	MaxRetries   *int   `json:"max_retries,omitempty"`
}

func (a *API) scheduleRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/schedules", a.listSchedules)
	mux.HandleFunc("POST /v1/schedules", a.createSchedule)
	mux.HandleFunc("PUT /v1/schedules/{name}", a.modifySchedule)
	mux.HandleFunc("DELETE /v1/schedules/{name}", a.deleteSchedule)
	mux.HandleFunc("PUT /v1/remotes/{remote}/backups/schedule/{schedule}/enable", a.enableSchedule(true))
	mux.HandleFunc("PUT /v1/remotes/{remote}/backups/schedule/{schedule}/disable", a.enableSchedule(false))
}

// listSchedules answers {"data": [Schedule]}, what the CLI's ScheduleListResponse reads.
func (a *API) listSchedules(w http.ResponseWriter, r *http.Request) {
	a.withView(w, objSchedule, func(v *projections.View) (any, error) {
		all, err := v.Schedules()
		out := []ScheduleOut{}
		for _, s := range all {
			kl, kr, mr := s.KeepLocal, s.KeepRemote, s.MaxRetries
			out = append(out, ScheduleOut{ScheduleName: s.Name, FullCron: s.FullCron, IncCron: s.IncCron, KeepLocal: &kl, KeepRemote: &kr,
				OnFailure: strings.ToUpper(s.OnFailure), MaxRetries: &mr})
		}
		return map[string]any{"data": out}, err
	})
}

func (a *API) createSchedule(w http.ResponseWriter, r *http.Request) {
	var in ScheduleOut
	if !readBody(w, r, &in) {
		return
	}
	body := map[string]any{"name": in.ScheduleName, "full_cron": in.FullCron, "on_failure": strings.ToLower(in.OnFailure)}
	if in.OnFailure == "" {
		body["on_failure"] = "skip"
	}
	if in.IncCron != "" {
		body["inc_cron"] = in.IncCron
	}
	for k, p := range map[string]*int{"keep_local": in.KeepLocal, "keep_remote": in.KeepRemote, "max_retries": in.MaxRetries} {
		if p != nil {
			body[k] = *p
		}
	}
	a.commit(w, r, "schedule.create", body, opCreate, objSchedule, fmt.Sprintf("Schedule '%s' created.", in.ScheduleName),
		map[string]string{"ScheduleName": in.ScheduleName})
}

// modifySchedule maps PUT /v1/schedules/{name} (`linstor schedule modify`) to
// schedule.modify: the fields the body gives change.
func (a *API) modifySchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var in struct {
		FullCron   *string `json:"full_cron"`
		IncCron    *string `json:"inc_cron"`
		KeepLocal  *int    `json:"keep_local"`
		KeepRemote *int    `json:"keep_remote"`
		OnFailure  *string `json:"on_failure"`
		MaxRetries *int    `json:"max_retries"`
	}
	if !readBody(w, r, &in) {
		return
	}
	body := map[string]any{"name": name}
	for k, p := range map[string]*string{"full_cron": in.FullCron, "inc_cron": in.IncCron} {
		if p != nil {
			body[k] = *p
		}
	}
	if in.OnFailure != nil {
		body["on_failure"] = strings.ToLower(*in.OnFailure)
	}
	for k, p := range map[string]*int{"keep_local": in.KeepLocal, "keep_remote": in.KeepRemote, "max_retries": in.MaxRetries} {
		if p != nil {
			body[k] = *p
		}
	}
	if len(body) == 1 {
		writeResults(w, []ApiCallRc{rc(maskWarn, opModify, objSchedule, codeNoEffect, "nothing to change in schedule "+name)})
		return
	}
	a.commit(w, r, "schedule.modify", body, opModify, objSchedule, fmt.Sprintf("Schedule '%s' modified.", name),
		map[string]string{"ScheduleName": name})
}

func (a *API) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	a.commit(w, r, "schedule.delete", map[string]any{"name": name}, opDelete, objSchedule, fmt.Sprintf("Schedule '%s' deleted.", name),
		map[string]string{"ScheduleName": name})
}

// enableSchedule maps LINSTOR's backup schedule enable/disable for a definition
// (rsc_name) or a group (grp_name); the controller level (neither) is refused.
func (a *API) enableSchedule(enable bool) http.HandlerFunc {
	verb, word := "backup.schedule-enable", "enabled"
	if !enable {
		verb, word = "backup.schedule-disable", "disabled"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			RscName string `json:"rsc_name"`
			GrpName string `json:"grp_name"`
		}
		if !readBody(w, r, &in) {
			return
		}
		if in.RscName == "" && in.GrpName == "" {
			writeFailure(w, opModify, objSchedule, cairn.InvalidField("resource", "Cairn enables a schedule for a resource definition (--rd) or a resource group (--rg), not for the whole controller"))
			return
		}
		remote, sched := r.PathValue("remote"), r.PathValue("schedule")
		body := map[string]any{"remote": remote, "schedule": sched}
		if in.RscName != "" {
			body["resource"] = in.RscName
		} else {
			body["group"] = in.GrpName
		}
		a.commit(w, r, verb, body, opModify, objSchedule, fmt.Sprintf("Backup schedule '%s' %s on remote '%s'.", sched, word, remote),
			map[string]string{"ScheduleName": sched, "RemoteName": remote})
	}
}
