package linstor

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/resources"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/projections"
)

// objSnapshot is LINSTOR's MASK_SNAPSHOT.
const objSnapshot uint64 = 0x0C0000

// Snapshot is LINSTOR's snapshot (of a resource definition).
type Snapshot struct {
	Name              string                     `json:"name"`
	ResourceName      string                     `json:"resource_name"`
	Nodes             []string                   `json:"nodes"`
	Flags             []string                   `json:"flags"`
	VolumeDefinitions []SnapshotVolumeDefinition `json:"volume_definitions"`
	Snapshots         []SnapshotNode             `json:"snapshots"`
	Props             map[string]string          `json:"props,omitempty"`
}

// SnapshotVolumeDefinition is one volume of a snapshot.
type SnapshotVolumeDefinition struct {
	VolumeNumber int    `json:"volume_number"`
	SizeKiB      uint64 `json:"size_kib"`
}

// SnapshotNode is a snapshot's part on one node.
type SnapshotNode struct {
	SnapshotName    string   `json:"snapshot_name"`
	NodeName        string   `json:"node_name"`
	CreateTimestamp int64    `json:"create_timestamp,omitempty"`
	Flags           []string `json:"flags"`
}

// snapshotOf renders a definition's snapshot: flags SUCCESSFUL once taken,
// FAILED_DEPLOYMENT when it failed (Cairn/Reason says why), none while under way.
func snapshotOf(rd projections.ResourceDefinition, s projections.RDSnapshot) Snapshot {
	flags := []string{}
	switch s.Phase {
	case projections.SnapshotTaken:
		flags = append(flags, "SUCCESSFUL")
	case projections.SnapshotFailed:
		flags = append(flags, "FAILED_DEPLOYMENT")
	}
	out := Snapshot{Name: s.Name, ResourceName: rd.Name, Nodes: s.Nodes, Flags: flags,
		Props: map[string]string{"Cairn/Phase": s.Phase}}
	if s.Reason != "" {
		out.Props["Cairn/Reason"] = s.Reason
	}
	for _, v := range s.Volumes {
		out.VolumeDefinitions = append(out.VolumeDefinitions, SnapshotVolumeDefinition{VolumeNumber: v.Volume, SizeKiB: v.SizeKiB})
	}
	for _, n := range s.Nodes {
		out.Snapshots = append(out.Snapshots, SnapshotNode{SnapshotName: s.Name, NodeName: n, CreateTimestamp: millis(s.DoneAt), Flags: flags})
	}
	return out
}

// viewSnapshots lists every definition's snapshots (?resources=, ?nodes= filter),
// streamed.
func (a *API) viewSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rds, nodes := queryList(q, "resources"), queryList(q, "nodes")
	v, err := a.DB.Read()
	if err != nil {
		writeFailure(w, 0, objSnapshot, cairn.Errorf(cairn.CodeUnavailable, "views unreadable: %v", err))
		return
	}
	defer v.Close()
	out := &arrayWriter{w: w}
	err = v.EachResourceDefinition(func(rd projections.ResourceDefinition) (bool, error) {
		if !matches(rds, rd.Name) {
			return true, nil
		}
		for _, s := range rd.Snapshots {
			if len(nodes) > 0 && !anyMatches(nodes, s.Nodes) {
				continue
			}
			if err := out.add(snapshotOf(rd, s)); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil && !out.started {
		writeFailure(w, 0, objSnapshot, err)
		return
	}
	out.close()
}

func anyMatches(filter map[string]bool, names []string) bool {
	for _, n := range names {
		if matches(filter, n) {
			return true
		}
	}
	return false
}

func (a *API) listSnapshots(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("rd")
	a.withView(w, objSnapshot, func(v *projections.View) (any, error) {
		rd, err := definition(v, name)
		out := []Snapshot{}
		for _, s := range rd.Snapshots {
			out = append(out, snapshotOf(rd, s))
		}
		return out, err
	})
}

func (a *API) getSnapshot(w http.ResponseWriter, r *http.Request) {
	name, snap := r.PathValue("rd"), r.PathValue("snap")
	a.withView(w, objSnapshot, func(v *projections.View) (any, error) {
		rd, err := definition(v, name)
		if err != nil {
			return nil, err
		}
		s, ok := rd.Snapshot(snap)
		if !ok {
			return nil, notFound(cairn.ObjResourceDefinition, "resource definition %s has no snapshot %s", name, snap)
		}
		return snapshotOf(rd, *s), nil
	})
}

// SnapshotWait is how long a snapshot create waits for the snapshot to be taken (as
// LINSTOR answers once it is) before it answers that it is still under way.
var SnapshotWait = 30 * time.Second

// createSnapshot maps LINSTOR's snapshot create to rd.snapshot and answers once the
// snapshot is taken (success), failed (an error with the reason) or SnapshotWait passed
// (a warning: still under way).
func (a *API) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var in Snapshot
	if !readBody(w, r, &in) {
		return
	}
	a.takeSnapshot(w, r, r.PathValue("rd"), in)
}

// snapshotMulti maps POST /v1/actions/snapshot/multi, linstor-csi's only way to take a
// snapshot (golinstor client/resource.go ResourceService.CreateSnapshots: {"snapshots":
// [{"name", "resource_name"}]}): one definition is taken as POST …/snapshots takes it;
// several at one moment with rd.snapshot-multi (a group snapshot: every replica of every
// definition suspends before any disk takes its copy).
func (a *API) snapshotMulti(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Snapshots []Snapshot `json:"snapshots"`
	}
	if !readBody(w, r, &in) {
		return
	}
	if len(in.Snapshots) == 0 {
		writeFailure(w, opCreate, objSnapshot, cairn.InvalidField("snapshots", "snapshots must name at least one snapshot"))
		return
	}
	a.takeSnapshots(w, r, in.Snapshots)
}

// takeSnapshot starts rd.snapshot of definition name and answers once it is taken,
// failed, or still under way after SnapshotWait (a warning).
func (a *API) takeSnapshot(w http.ResponseWriter, r *http.Request, name string, in Snapshot) {
	in.ResourceName = name
	a.takeSnapshots(w, r, []Snapshot{in})
}

// takeSnapshots starts the snapshots (rd.snapshot for one, rd.snapshot-multi for
// several) and answers once every one is taken, one failed, or some are still under way
// after SnapshotWait (a warning).
func (a *API) takeSnapshots(w http.ResponseWriter, r *http.Request, snaps []Snapshot) {
	var refs []map[string]string
	for _, in := range snaps {
		if len(in.Nodes) > 0 {
			writeFailure(w, opCreate, objSnapshot, cairn.InvalidField("nodes", "Cairn snapshots every disk of %s; a subset of nodes is not chosen", in.ResourceName))
			return
		}
		refs = append(refs, map[string]string{"resource": in.ResourceName, "name": in.Name})
	}
	// linstor-csi snapshots a volume right after creating it: a replica whose agent is
	// still bringing the resource up suspends only once it is up, while the others wait
	// suspended, and the snapshot fails at the suspension bound. Wait (up to half of
	// SnapshotWait) until every replica reports its desired state carried out.
	a.waitReplicasUp(r.Context(), refs, time.Now().Add(SnapshotWait/2))
	verb, body := "rd.snapshot", map[string]any{"resource": refs[0]["resource"], "name": refs[0]["name"]}
	if len(refs) > 1 {
		verb, body = "rd.snapshot-multi", map[string]any{"snapshots": refs}
	}
	reply, err := a.command(r, verb, body)
	if err != nil {
		writeFailure(w, opCreate, objSnapshot, err)
		return
	}
	deadline := time.Now().Add(SnapshotWait)
	for {
		var rcs []ApiCallRc
		pending := ""
		for _, ref := range refs {
			name, snap := ref["resource"], ref["name"]
			rd, err := a.definitionNow(name)
			if err != nil {
				writeFailure(w, opCreate, objSnapshot, err)
				return
			}
			s, ok := rd.Snapshot(snap)
			switch {
			case !ok:
				writeFailure(w, opCreate, objSnapshot, cairn.Errorf(cairn.CodeNotFound, "snapshot %s of %s is gone", snap, name))
				return
			case s.Phase == projections.SnapshotFailed:
				writeFailure(w, opCreate, objSnapshot, cairn.Errorf(cairn.CodePreconditionFailed, "snapshot %s of %s failed: %s", snap, name, s.Reason))
				return
			case s.Phase == projections.SnapshotTaken:
				rcs = append(rcs, success(opCreate, objSnapshot, fmt.Sprintf("New snapshot '%s' of resource '%s' successfully created.", snap, name),
					map[string]string{"RscDfn": name, "SnapshotName": snap}))
			default:
				pending = fmt.Sprintf("snapshot %s of %s is still %s", snap, name, s.Phase)
			}
		}
		switch {
		case pending == "":
			writeResults(w, append(results(rcs[0], reply, opCreate, objSnapshot), rcs[1:]...))
			return
		case time.Now().After(deadline) || r.Context().Err() != nil:
			e := rc(maskWarn, opCreate, objSnapshot, codeNoEffect, fmt.Sprintf("%s after %s; see linstor snapshot list", pending, SnapshotWait))
			writeResults(w, []ApiCallRc{e})
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deleteSnapshot maps to rd.snapshot-delete; a snapshot that is not there answers 200
// with WARN_NOT_FOUND, as a missing resource's delete does (a clone's snapshot, for one,
// goes by itself once the clone is restored).
func (a *API) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	name, snap := r.PathValue("rd"), r.PathValue("snap")
	refs := map[string]string{"RscDfn": name, "SnapshotName": snap}
	reply, err := a.command(r, "rd.snapshot-delete", map[string]any{"resource": name, "name": snap})
	if cairn.ErrorCode(err) == cairn.CodeNotFound {
		e := rc(maskWarn, opDelete, objSnapshot, codeWarnNotFound, "Snapshot '"+snap+"' of resource '"+name+"' not found.")
		e.Details, e.ObjRefs = cairn.AsError(err).Message, refs
		writeResults(w, []ApiCallRc{e})
		return
	}
	if err != nil {
		writeFailure(w, opDelete, objSnapshot, err)
		return
	}
	writeResults(w, results(success(opDelete, objSnapshot, fmt.Sprintf("Snapshot '%s' of resource '%s' deleted.", snap, name), refs), reply, opDelete, objSnapshot))
}

// rollbackSnapshot maps LINSTOR's snapshot rollback to rd.rollback (the latest
// snapshot, the resource deactivated everywhere first).
func (a *API) rollbackSnapshot(w http.ResponseWriter, r *http.Request) {
	name, snap := r.PathValue("rd"), r.PathValue("snap")
	a.commit(w, r, "rd.rollback", map[string]any{"resource": name, "snapshot": snap}, opModify, objSnapshot,
		fmt.Sprintf("Resource '%s' rolled back to snapshot '%s'.", name, snap), map[string]string{"RscDfn": name, "SnapshotName": snap})
}

// waitReplicasUp waits until every active replica of the definitions refs name reports
// its desired state carried out (drbd.PhaseApplied), until deadline or ctx ends; either
// way the caller goes on (admission decides).
func (a *API) waitReplicasUp(ctx context.Context, refs []map[string]string, deadline time.Time) {
	up := func(v *projections.View) bool {
		for _, ref := range refs {
			rd, ok, err := v.ResourceDefinition(ref["resource"])
			if err != nil || !ok {
				return true // admission answers for it
			}
			statuses, err := v.ResourceStatus(rd.Name)
			if err != nil {
				return true
			}
			for _, rep := range rd.Replicas {
				if st, ok := statuses[rep.Node]; !rep.Inactive && (!ok || st.Phase != drbd.PhaseApplied) {
					return false
				}
			}
		}
		return true
	}
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ready := true
		if err := a.read(func(v *projections.View) error { ready = up(v); return nil }); err != nil || ready {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// restoreSnapshot maps LINSTOR's snapshot-restore-resource to rd.restore: into the
// definition the client created (linstor-csi, the CLI), or a new one when it does not
// exist (a Cairn shortcut); on the nodes given (each must hold a copy; the rest of the
// placement is the client's next autoplace, which syncs them in full) or on every node
// holding a copy. A target that already has replicas answers FAIL_EXISTS_RSC, which
// linstor-csi takes for "a concurrent restore did it" (pkg/client/linstor.go,
// reconcileSnapshotResources).
func (a *API) restoreSnapshot(w http.ResponseWriter, r *http.Request) {
	name, snap := r.PathValue("rd"), r.PathValue("snap")
	var in struct {
		ToResource string   `json:"to_resource"`
		Nodes      []string `json:"nodes"`
	}
	if !readBody(w, r, &in) {
		return
	}
	body := map[string]any{"resource": name, "snapshot": snap, "target": in.ToResource}
	if len(in.Nodes) > 0 {
		body["nodes"] = in.Nodes
	}
	a.commit(w, r, "rd.restore", body, opCreate, objRsc,
		fmt.Sprintf("Resource '%s' restored from snapshot '%s' of '%s'.", in.ToResource, snap, name), map[string]string{"RscDfn": in.ToResource})
}

// restoreVolumeDefinitions maps LINSTOR's snapshot-restore-volume-definition (the first
// step of a restore into a definition the client created) to rd.restore-volumes. A
// target that has volume definitions already answers FAIL_EXISTS_VLM_DFN, which
// linstor-csi takes for "a concurrent restore did it" (reconcileSnapshotVolumeDefinitions).
func (a *API) restoreVolumeDefinitions(w http.ResponseWriter, r *http.Request) {
	name, snap := r.PathValue("rd"), r.PathValue("snap")
	var in struct {
		ToResource string `json:"to_resource"`
	}
	if !readBody(w, r, &in) {
		return
	}
	a.commit(w, r, "rd.restore-volumes", map[string]any{"resource": name, "snapshot": snap, "target": in.ToResource}, opCreate, objVlmDfn,
		fmt.Sprintf("Volume definitions of '%s' restored from snapshot '%s' of '%s'.", in.ToResource, snap, name), map[string]string{"RscDfn": in.ToResource})
}

// cloneDefinition maps LINSTOR's clone to rd.clone and answers where its status is.
func (a *API) cloneDefinition(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("rd")
	var in struct {
		Name string `json:"name"`
	}
	if !readBody(w, r, &in) {
		return
	}
	reply, err := a.command(r, "rd.clone", map[string]any{"resource": name, "target": in.Name})
	if err != nil {
		writeFailure(w, opCreate, objRscDfn, err)
		return
	}
	msgs := results(success(opCreate, objRscDfn, fmt.Sprintf("Clone of '%s' into '%s' started.", name, in.Name), map[string]string{"RscDfn": in.Name}), reply, opCreate, objRscDfn)
	writeJSON(w, http.StatusCreated, map[string]any{"location": "/v1/resource-definitions/" + name + "/clone/" + in.Name,
		"source_name": name, "clone_name": in.Name, "messages": msgs})
}

// cloneStatus answers COMPLETE once the target was restored from the clone's snapshot,
// FAILED when the snapshot failed, CLONING until then.
func (a *API) cloneStatus(w http.ResponseWriter, r *http.Request) {
	name, target := r.PathValue("rd"), r.PathValue("clone")
	a.withView(w, objRscDfn, func(v *projections.View) (any, error) {
		if _, ok, err := v.ResourceDefinition(target); err != nil || ok {
			return map[string]string{"status": "COMPLETE"}, err
		}
		rd, err := definition(v, name)
		if err != nil {
			return nil, err
		}
		s, ok := rd.Snapshot(resources.CloneSnapshot(target))
		switch {
		case !ok:
			return nil, notFound(cairn.ObjResourceDefinition, "no clone of %s into %s", name, target)
		case s.Phase == projections.SnapshotFailed:
			return map[string]string{"status": "FAILED"}, nil
		}
		return map[string]string{"status": "CLONING"}, nil
	})
}
