package linstor

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backing"
)

// StoragePool is LINSTOR's storage pool.
type StoragePool struct {
	StoragePoolName   string            `json:"storage_pool_name"`
	NodeName          string            `json:"node_name,omitempty"`
	ProviderKind      string            `json:"provider_kind"`
	Props             map[string]string `json:"props,omitempty"`
	FreeCapacity      int64             `json:"free_capacity"`
	TotalCapacity     int64             `json:"total_capacity"`
	FreeSpaceMgrName  string            `json:"free_space_mgr_name"`
	SupportsSnapshots bool              `json:"supports_snapshots"`
	Reports           []ApiCallRc       `json:"reports,omitempty"`
}

// Storage pool properties: where the pool lives (LINSTOR's names) and its capacity,
// which Cairn needs to place replicas (agents do not report it yet).
const (
	propStorPoolName = "StorDriver/StorPoolName"
	propFileDir      = "StorDriver/FileDir"
	propCapacityKiB  = "Cairn/CapacityKiB"
	// propOversubscription is LINSTOR's over-provisioning ratio of thin pools (sp.modify
	// overprovision).
	propOversubscription = "MaxOversubscriptionRatio"
	// propReflink is read-only: whether the file system of a file pool clones files, as
	// its agent found (backing.PoolReport.Reflink).
	propReflink = "Cairn/Reflink"
)

var providerKinds = map[backing.Provider]string{backing.ProviderLVM: "LVM", backing.ProviderLVMThin: "LVM_THIN",
	backing.ProviderZFS: "ZFS", backing.ProviderZFSThin: "ZFS_THIN", backing.ProviderFile: "FILE", backing.ProviderFileThin: "FILE_THIN"}

// providerOf maps a LINSTOR provider kind (any case) to Cairn's provider.
func providerOf(kind string) (backing.Provider, bool) {
	for p, k := range providerKinds {
		if strings.EqualFold(k, kind) {
			return p, true
		}
	}
	return "", false
}

// storagePoolOf renders a storage pool; rep is its agent's latest report (nil: none
// yet): a report with an error is the pool's ERROR report, which LINSTOR's CLI shows
// as the pool's state.
func storagePoolOf(sp projections.StoragePool, rep *backing.PoolReport) StoragePool {
	out := StoragePool{StoragePoolName: sp.Name, NodeName: sp.Node, ProviderKind: providerKinds[sp.Provider],
		Props:        map[string]string{propStorPoolName: sp.Pool},
		FreeCapacity: int64(sp.FreeKiB()), TotalCapacity: int64(sp.CapacityKiB),
		FreeSpaceMgrName: sp.Node + ";" + sp.Name, SupportsSnapshots: backing.CanSnapshot(sp.Provider)}
	if sp.CapacityKiB > 0 {
		out.Props[propCapacityKiB] = strconv.FormatUint(sp.CapacityKiB, 10)
	}
	out.TotalCapacity = int64(sp.TotalKiB()) // what the back end has where smaller
	if sp.Thin() {
		out.Props[propOversubscription] = strconv.FormatFloat(sp.OverprovisionRatio(), 'f', -1, 64)
	}
	if rep != nil && rep.Reflink != nil {
		out.Props[propReflink] = strconv.FormatBool(*rep.Reflink) // what the agent found
	}
	if rep != nil && rep.Error != "" {
		out.Reports = []ApiCallRc{rc(maskError, 0, objStorPool, codeStorPoolUnusable,
			"the agent of node "+sp.Node+" cannot use storage pool "+sp.Name+": "+rep.Error)}
		out.FreeCapacity = 0
	}
	return out
}

// streamPools streams a page of the storage pools passing the node and pool name
// filters, ordered by node, then name (the views' key order).
func (a *API) streamPools(w http.ResponseWriter, r *http.Request, nodes, pools map[string]bool, check func(v *projections.View) error) {
	a.streamPage(w, r, objStorPool, func(v *projections.View, emit func(any) (bool, error)) error {
		if check != nil {
			if err := check(v); err != nil {
				return err
			}
		}
		return v.EachStoragePool(func(sp projections.StoragePool) (bool, error) {
			if !matches(nodes, sp.Node) || !matches(pools, sp.Name) {
				return true, nil
			}
			rep, err := poolReport(v, sp)
			if err != nil {
				return false, err
			}
			return emit(storagePoolOf(sp, rep))
		})
	})
}

func (a *API) viewStoragePools(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.streamPools(w, r, queryList(q, "nodes"), queryList(q, "storage_pools"), nil)
}

func (a *API) nodeStoragePools(w http.ResponseWriter, r *http.Request) {
	node, q := r.PathValue("node"), r.URL.Query()
	a.streamPools(w, r, map[string]bool{strings.ToLower(node): true}, queryList(q, "storage_pools"), func(v *projections.View) error {
		if _, ok, err := v.Node(node); err != nil || !ok {
			return orNotFound(err, cairn.ObjNode, "node %s is not in the cluster", node)
		}
		return nil
	})
}

func (a *API) getStoragePool(w http.ResponseWriter, r *http.Request) {
	node, pool := r.PathValue("node"), r.PathValue("pool")
	a.withView(w, objStorPool, func(v *projections.View) (any, error) {
		sp, ok, err := v.StoragePool(node, pool)
		if err != nil || !ok {
			return nil, orNotFound(err, cairn.ObjStoragePool, "node %s has no storage pool %s", node, pool)
		}
		rep, err := poolReport(v, sp)
		return storagePoolOf(sp, rep), err
	})
}

// poolReport is the latest report of sp's agent, nil before the first.
func poolReport(v *projections.View, sp projections.StoragePool) (*backing.PoolReport, error) {
	rep, ok, err := v.StoragePoolReport(sp.Node, sp.Name)
	if err != nil || !ok {
		return nil, err
	}
	return &rep, nil
}

// orNotFound is err, or a not_found about object when err is nil.
func orNotFound(err error, object, format string, args ...any) error {
	if err != nil {
		return err
	}
	return notFound(object, format, args...)
}

// createStoragePool maps LINSTOR's storage pool create to sp.create: the provider from
// provider_kind, the pool from StorDriver/StorPoolName (LVM, ZFS) or StorDriver/FileDir
// (FILE), the capacity from Cairn/CapacityKiB when given (otherwise the node's agent
// reports it; until then Cairn places on the pool only by name, with a warning).
func (a *API) createStoragePool(w http.ResponseWriter, r *http.Request) {
	node := r.PathValue("node")
	var in StoragePool
	if !readBody(w, r, &in) {
		return
	}
	provider, ok := providerOf(in.ProviderKind)
	if !ok {
		writeFailure(w, opCreate, objStorPool, cairn.InvalidField("provider", "provider kind %q: Cairn serves LVM, LVM_THIN, ZFS, ZFS_THIN, FILE and FILE_THIN", in.ProviderKind))
		return
	}
	pool := in.Props[propStorPoolName]
	if pool == "" {
		pool = in.Props[propFileDir]
	}
	cmd := map[string]any{"node": node, "name": in.StoragePoolName, "provider": provider, "pool": pool}
	capacity, set := in.Props[propCapacityKiB]
	if set {
		n, err := capacityOf(capacity)
		if err != nil {
			writeFailure(w, opCreate, objStorPool, err)
			return
		}
		cmd["capacity_kib"] = n
	}
	reply, err := a.command(r, "sp.create", cmd)
	if err != nil {
		writeFailure(w, opCreate, objStorPool, err)
		return
	}
	out := results(success(opCreate, objStorPool, fmt.Sprintf("Storage pool '%s' created.", in.StoragePoolName), map[string]string{"Node": node, "StorPool": in.StoragePoolName}), reply, opCreate, objStorPool)
	if !set {
		e := rc(maskWarn, opCreate, objStorPool, codeNoEffect, "storage pool "+in.StoragePoolName+" on node "+node+" has no capacity yet: its agent reports one within its --capacity-interval (30 s); until then autoplace passes it over")
		e.Correction = "linstor storage-pool set-property " + node + " " + in.StoragePoolName + " " + propCapacityKiB + " <KiB>"
		out = append(out, e)
	}
	writeResults(w, out)
}

// capacityOf reads a Cairn/CapacityKiB value.
func capacityOf(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, cairn.InvalidField("capacity_kib", "%s must be a number of KiB, got %q", propCapacityKiB, s)
	}
	return n, nil
}

// modifyStoragePool maps LINSTOR's pool modify: Cairn/CapacityKiB and
// MaxOversubscriptionRatio to sp.modify; a pool's other properties are settled at
// creation.
func (a *API) modifyStoragePool(w http.ResponseWriter, r *http.Request) {
	node, pool := r.PathValue("node"), r.PathValue("pool")
	var in struct {
		OverrideProps map[string]string `json:"override_props"`
		DeleteProps   []string          `json:"delete_props"`
	}
	if !readBody(w, r, &in) {
		return
	}
	for k := range in.OverrideProps {
		if k != propCapacityKiB && k != propOversubscription {
			writeFailure(w, opModify, objStorPool, cairn.InvalidField("properties", "storage pool property %s is settled at creation; only %s and %s change", k, propCapacityKiB, propOversubscription))
			return
		}
	}
	if len(in.DeleteProps) > 0 {
		writeFailure(w, opModify, objStorPool, cairn.InvalidField("properties", "storage pool properties are not removed (%s)", strings.Join(in.DeleteProps, ", ")))
		return
	}
	cmd := map[string]any{"node": node, "name": pool}
	if capacity, set := in.OverrideProps[propCapacityKiB]; set {
		n, err := capacityOf(capacity)
		if err != nil {
			writeFailure(w, opModify, objStorPool, err)
			return
		}
		cmd["capacity_kib"] = n
	}
	if ratio, set := in.OverrideProps[propOversubscription]; set {
		f, err := strconv.ParseFloat(ratio, 64)
		if err != nil {
			writeFailure(w, opModify, objStorPool, cairn.InvalidField("overprovision", "%s must be a number, got %q", propOversubscription, ratio))
			return
		}
		cmd["overprovision"] = f
	}
	if len(cmd) == 2 {
		writeResults(w, []ApiCallRc{rc(maskWarn, opModify, objStorPool, codeNoEffect, "nothing to change on storage pool "+pool)})
		return
	}
	reply, err := a.command(r, "sp.modify", cmd)
	if err != nil {
		writeFailure(w, opModify, objStorPool, err)
		return
	}
	writeResults(w, results(success(opModify, objStorPool, fmt.Sprintf("Storage pool '%s' on node %s modified.", pool, node),
		map[string]string{"Node": node, "StorPool": pool}), reply, opModify, objStorPool))
}

// deleteStoragePool maps to sp.delete (refused, FAIL_IN_USE, while disks are on it).
func (a *API) deleteStoragePool(w http.ResponseWriter, r *http.Request) {
	node, pool := r.PathValue("node"), r.PathValue("pool")
	a.commit(w, r, "sp.delete", map[string]any{"node": node, "name": pool}, opDelete, objStorPool, fmt.Sprintf("Storage pool '%s' deleted.", pool), map[string]string{"Node": node, "StorPool": pool})
}
