package linstor

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backing"
)

// PhysicalStorage is LINSTOR's group of unused devices of one size and kind, by node.
type PhysicalStorage struct {
	Size       uint64                             `json:"size"`
	Rotational bool                               `json:"rotational"`
	Nodes      map[string][]PhysicalStorageDevice `json:"nodes"`
}

// PhysicalStorageDevice is one device of a PhysicalStorage group.
type PhysicalStorageDevice struct {
	Device string `json:"device"`
	Model  string `json:"model,omitempty"`
	Serial string `json:"serial,omitempty"`
	WWN    string `json:"wwn,omitempty"`
}

// PhysicalStorageNode is one unused device of one node.
type PhysicalStorageNode struct {
	Size       uint64 `json:"size"`
	Rotational bool   `json:"rotational"`
	Device     string `json:"device"`
	Model      string `json:"model,omitempty"`
	Serial     string `json:"serial,omitempty"`
	WWN        string `json:"wwn,omitempty"`
}

// StatusOf reads the last report a node's agent sent on its status subject of one kind
// (<prefix>.status.<node>.<kind>.<node>): ok false when there is none.
type StatusOf func(ctx context.Context, node, kind string) (data []byte, ok bool, err error)

// StatusFrom is the StatusOf of a status reader (events.Store.LastStatus) and the
// deployment's subject names (events.Names.Status).
func StatusFrom(last func(ctx context.Context, subject string) ([]byte, bool, error), subject func(node, kind, id string) string) StatusOf {
	return func(ctx context.Context, node, kind string) ([]byte, bool, error) {
		return last(ctx, subject(node, kind, node))
	}
}

// lastStatus decodes a node's last report of kind into v (ok false: none).
func (a *API) lastStatus(ctx context.Context, node, kind string, v any) (bool, error) {
	data, ok, err := a.Status(ctx, node, kind)
	if err != nil || !ok {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%s report of %s: %w", kind, node, err)
	}
	return true, nil
}

// physicalRoutes serve LINSTOR's physical storage: the block devices each node's agent
// reports unused (lsblk, every --capacity-interval), and a storage pool made on some of
// them (POST /v1/physical-storage/{node}: sp.create with devices).
func (a *API) physicalRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/physical-storage/{node}", a.createDevicePool)
	if a.Status == nil {
		return
	}
	mux.HandleFunc("GET /v1/physical-storage", a.listPhysicalStorage)
	mux.HandleFunc("GET /v1/physical-storage/{node}", a.nodePhysicalStorage)
}

// devicePoolIn is LINSTOR's PhysicalStorageCreate (linstorapi.py
// physical_storage_create_device_pool).
type devicePoolIn struct {
	ProviderKind    string   `json:"provider_kind"`
	DevicePaths     []string `json:"device_paths"`
	RaidLevel       string   `json:"raid_level"`
	PoolName        string   `json:"pool_name"`
	VDOEnable       bool     `json:"vdo_enable"`
	SED             bool     `json:"sed"`
	WithStoragePool *struct {
		Name  string            `json:"name"`
		Props map[string]string `json:"props"`
	} `json:"with_storage_pool"`
	PVCreateArguments    []string `json:"pv_create_arguments"`
	VGCreateArguments    []string `json:"vg_create_arguments"`
	LVCreateArguments    []string `json:"lv_create_arguments"`
	ZpoolCreateArguments []string `json:"zpool_create_arguments"`
}

// DevicePoolBackEnd is the back end LINSTOR names for a device pool: for lvm the volume
// group pool; for lvm_thin the volume group linstor_<pool> and its thin pool <pool>
// (pool VG/THINPOOL as given is kept); for zfs and zfs_thin the zpool pool. An empty
// pool is linstor_<first device's name>, as LINSTOR's.
func DevicePoolBackEnd(provider backing.Provider, pool string, devices []string) string {
	if pool == "" && len(devices) > 0 {
		pool = "linstor_" + path.Base(devices[0])
	}
	if provider == backing.ProviderLVMThin && !strings.Contains(pool, "/") {
		return "linstor_" + pool + "/" + pool
	}
	return pool
}

// createDevicePool maps LINSTOR's physical-storage create-device-pool to sp.create with
// devices: the node's agent makes the back end (never over a device carrying a
// signature) and reports the pool. Cairn keeps device pools only as storage pools:
// without with_storage_pool it is refused naming the field, as are RAID levels other
// than JBOD, VDO, SED and extra tool arguments.
func (a *API) createDevicePool(w http.ResponseWriter, r *http.Request) {
	var in devicePoolIn
	if !readBody(w, r, &in) {
		return
	}
	node := r.PathValue("node")
	kind := strings.ReplaceAll(strings.ToUpper(in.ProviderKind), "_", "") // the CLI's lvmthin, golinstor's LVM_THIN
	provider, ok := providerOf(strings.Replace(kind, "THIN", "_THIN", 1))
	var refuse error
	switch {
	case !ok || provider == backing.ProviderFile || provider == backing.ProviderFileThin:
		refuse = cairn.InvalidField("provider_kind", "%q: device pools are LVM, LVMTHIN, ZFS or ZFSTHIN", in.ProviderKind)
	case in.WithStoragePool == nil || in.WithStoragePool.Name == "":
		refuse = cairn.InvalidField("with_storage_pool", "Cairn makes devices into a storage pool only: give its name (--storage-pool)")
	case in.RaidLevel != "" && !strings.EqualFold(in.RaidLevel, "JBOD"):
		refuse = cairn.InvalidField("raid_level", "%q: Cairn makes JBOD pools only", in.RaidLevel)
	case in.VDOEnable:
		refuse = cairn.InvalidField("vdo_enable", "VDO is not served")
	case in.SED:
		refuse = cairn.InvalidField("sed", "self-encrypting drives are not served")
	case len(in.PVCreateArguments)+len(in.VGCreateArguments)+len(in.LVCreateArguments)+len(in.ZpoolCreateArguments) > 0:
		refuse = cairn.InvalidField("vg_create_arguments", "extra arguments to the tools are not served")
	}
	if refuse != nil {
		writeFailure(w, opCreate, objStorPool, refuse)
		return
	}
	name := in.WithStoragePool.Name
	cmd := map[string]any{"node": node, "name": name, "provider": provider,
		"pool": DevicePoolBackEnd(provider, in.PoolName, in.DevicePaths), "devices": in.DevicePaths}
	a.commit(w, r, "sp.create", cmd, opCreate, objStorPool,
		fmt.Sprintf("Storage pool '%s' created on node '%s'; its agent makes it on %s.", name, node, strings.Join(in.DevicePaths, ", ")),
		map[string]string{"Node": node, "StorPool": name})
}

// listPhysicalStorage groups every node's unused devices (groupDevices); nodes that never reported, or could not list their devices, are left
// out.
func (a *API) listPhysicalStorage(w http.ResponseWriter, r *http.Request) {
	var nodes []string
	if err := a.read(func(v *projections.View) error {
		return v.EachNode("", func(n projections.Node) (bool, error) {
			nodes = append(nodes, n.Spec.Name)
			return true, nil
		})
	}); err != nil {
		writeFailure(w, 0, objNode, err)
		return
	}
	reports := map[string]backing.DeviceReport{}
	for _, node := range nodes {
		var rep backing.DeviceReport
		ok, err := a.lastStatus(r.Context(), node, backing.DevicesKind, &rep)
		if err != nil {
			writeFailure(w, 0, objNode, cairn.Errorf(cairn.CodeUnavailable, "devices of %s: %v", node, err))
			return
		}
		if ok && rep.Error == "" { // never reported, or could not list them: GET …/{node} says why
			reports[node] = rep
		}
	}
	out := groupDevices(reports)
	writeJSON(w, http.StatusOK, page(r.URL.Query(), out))
}

// nodePhysicalStorage lists one node's unused devices; a node that does not exist is
// 404, one whose agent never reported answers an empty list, one whose lsblk failed 503
// saying why.
func (a *API) nodePhysicalStorage(w http.ResponseWriter, r *http.Request) {
	node := r.PathValue("node")
	if !a.nodeExists(w, node) {
		return
	}
	var rep backing.DeviceReport
	if _, err := a.lastStatus(r.Context(), node, backing.DevicesKind, &rep); err != nil {
		writeFailure(w, 0, objNode, cairn.Errorf(cairn.CodeUnavailable, "devices of %s: %v", node, err))
		return
	}
	out := make([]PhysicalStorageNode, 0, len(rep.Devices))
	for _, d := range rep.Devices {
		out = append(out, PhysicalStorageNode{Size: d.SizeBytes, Rotational: d.Rotational, Device: d.Path, Model: d.Model, Serial: d.Serial, WWN: d.WWN})
	}
	if rep.Error != "" {
		writeFailure(w, 0, objNode, cairn.Errorf(cairn.CodeUnavailable, "node %s could not list its block devices at %s: %s", node, rep.At.Format(time.RFC3339), rep.Error))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// nodeExists reports whether node is in the cluster; when it is not (or the views
// cannot be read) it has answered the request (404 FAIL_NOT_FOUND_NODE).
func (a *API) nodeExists(w http.ResponseWriter, node string) bool {
	exists := false
	if err := a.read(func(v *projections.View) (err error) {
		_, exists, err = v.Node(node)
		return err
	}); err != nil {
		writeFailure(w, 0, objNode, err)
		return false
	}
	if !exists {
		writeFailure(w, 0, objNode, cairn.Errorf(cairn.CodeNotFound, "node %s is not in the cluster", node).About(cairn.ObjNode))
	}
	return exists
}

// groupDevices groups the nodes' unused devices by size and kind: largest first,
// solid-state before rotating among equal sizes, each group's devices by node.
func groupDevices(reports map[string]backing.DeviceReport) []PhysicalStorage {
	type key struct {
		size uint64
		rota bool
	}
	groups := map[key]*PhysicalStorage{}
	for _, node := range slices.Sorted(maps.Keys(reports)) {
		for _, d := range reports[node].Devices {
			k := key{d.SizeBytes, d.Rotational}
			g := groups[k]
			if g == nil {
				g = &PhysicalStorage{Size: d.SizeBytes, Rotational: d.Rotational, Nodes: map[string][]PhysicalStorageDevice{}}
				groups[k] = g
			}
			g.Nodes[node] = append(g.Nodes[node], PhysicalStorageDevice{Device: d.Path, Model: d.Model, Serial: d.Serial, WWN: d.WWN})
		}
	}
	out := make([]PhysicalStorage, 0, len(groups))
	for _, g := range groups {
		out = append(out, *g)
	}
	rank := func(rotational bool) int {
		if rotational {
			return 1
		}
		return 0
	}
	slices.SortFunc(out, func(x, y PhysicalStorage) int {
		return cmp.Or(cmp.Compare(y.Size, x.Size), cmp.Compare(rank(x.Rotational), rank(y.Rotational)))
	})
	return out
}
