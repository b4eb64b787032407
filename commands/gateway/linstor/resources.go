package linstor

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// Resource is LINSTOR's resource (with volumes, as /v1/view/resources shows it).
type Resource struct {
	Name        string            `json:"name"`
	NodeName    string            `json:"node_name"`
	Props       map[string]string `json:"props,omitempty"`
	Flags       []string          `json:"flags,omitempty"`
	LayerObject ResourceLayer     `json:"layer_object"`
	State       *ResourceState    `json:"state,omitempty"`
	Volumes     []Volume          `json:"volumes,omitempty"`
	// CreateTimestamp is when the replica was added, in Unix milliseconds.
	CreateTimestamp int64 `json:"create_timestamp,omitempty"`
}

// ResourceState says whether the resource is open (DRBD Primary).
type ResourceState struct {
	InUse *bool `json:"in_use,omitempty"`
}

// ResourceLayer is one layer of a resource: DRBD over STORAGE.
type ResourceLayer struct {
	Type     string          `json:"type"`
	Children []ResourceLayer `json:"children,omitempty"`
	Drbd     *DrbdResource   `json:"drbd,omitempty"`
}

// DrbdResource is the DRBD layer of a resource.
type DrbdResource struct {
	NodeID      int                       `json:"node_id"`
	TCPPorts    []int                     `json:"tcp_ports,omitempty"`
	PeerSlots   int                       `json:"peer_slots,omitempty"`
	Flags       []string                  `json:"flags,omitempty"`
	Connections map[string]DrbdConnection `json:"connections,omitempty"`
	// PromotionScore and MayPromote are DRBD's, as the agent last reported them
	// (linstor-csi takes a replica with promotion_score 0 for one with issues).
	PromotionScore int  `json:"promotion_score"`
	MayPromote     bool `json:"may_promote"`
}

// DrbdConnection is the connection to one peer.
type DrbdConnection struct {
	Connected bool   `json:"connected"`
	Message   string `json:"message,omitempty"`
}

// Volume is LINSTOR's volume of a resource.
type Volume struct {
	VolumeNumber     int          `json:"volume_number"`
	StoragePoolName  string       `json:"storage_pool_name,omitempty"`
	ProviderKind     string       `json:"provider_kind,omitempty"`
	DevicePath       string       `json:"device_path,omitempty"`
	AllocatedSizeKiB uint64       `json:"allocated_size_kib,omitempty"`
	UsableSizeKiB    uint64       `json:"usable_size_kib,omitempty"`
	Flags            []string     `json:"flags,omitempty"`
	State            *VolumeState `json:"state,omitempty"`
	LayerDataList    []LayerData  `json:"layer_data_list,omitempty"`
}

// VolumeState is the disk state DRBD reports.
type VolumeState struct {
	DiskState string `json:"disk_state,omitempty"`
}

// The diskless pool LINSTOR names diskless volumes after.
const disklessPool = "DfltDisklessStorPool"

// resourceOf renders one replica with what its agent last observed (nil: nothing yet).
func resourceOf(rd projections.ResourceDefinition, rep projections.Replica, st *drbd.Status) Resource {
	var flags []string
	if rep.Diskless {
		flags = append(flags, "DISKLESS", "DRBD_DISKLESS")
	}
	if rep.Tiebreaker {
		flags = append(flags, "TIE_BREAKER")
	}
	if rep.Inactive {
		flags = append(flags, "INACTIVE")
	}
	drbdLayer := &DrbdResource{NodeID: rep.NodeID, TCPPorts: []int{rd.Port}, PeerSlots: 7}
	if st != nil && len(st.Peers) > 0 {
		drbdLayer.Connections = map[string]DrbdConnection{}
		for _, p := range st.Peers {
			c := p.Connection
			if c == "" {
				c = "Unknown"
			}
			drbdLayer.Connections[p.Node] = DrbdConnection{Connected: c == "Connected", Message: c}
		}
	}
	out := Resource{Name: rd.Name, NodeName: rep.Node, Flags: flags, CreateTimestamp: millis(rep.AddedAt), Props: propsOf(rep.DRBDOptions, rep.Properties),
		LayerObject: ResourceLayer{Type: "DRBD", Drbd: drbdLayer, Children: []ResourceLayer{{Type: "STORAGE"}}}}
	if st != nil {
		inUse := st.Role == "Primary"
		out.State = &ResourceState{InUse: &inUse}
		if st.MayPromote != nil {
			drbdLayer.MayPromote, drbdLayer.PromotionScore = *st.MayPromote, st.PromotionScore
		}
	}
	for _, vd := range rd.Volumes {
		vol := Volume{VolumeNumber: vd.Volume, StoragePoolName: rep.StoragePool, ProviderKind: providerKinds[rep.Provider],
			AllocatedSizeKiB: vd.SizeKiB, UsableSizeKiB: vd.SizeKiB, LayerDataList: []LayerData{{Type: "DRBD"}, {Type: "STORAGE"}}}
		if rep.Diskless {
			vol.StoragePoolName, vol.ProviderKind, vol.AllocatedSizeKiB = disklessPool, "DISKLESS", 0
		}
		if m, ok := rep.Minor(vd.Volume); ok {
			vol.DevicePath = "/dev/drbd" + strconv.Itoa(m)
			// The DRBD layer's volume: the minor `linstor volume list` shows (a
			// replica's own: Cairn allocates minors per node).
			vol.LayerDataList[0].Data = map[string]any{"device_path": vol.DevicePath, "meta_disk": "internal",
				"drbd_volume_definition": map[string]any{"volume_number": vd.Volume, "minor_number": m, "resource_name_suffix": ""}}
		}
		if st != nil {
			for _, vs := range st.Volumes {
				if vs.Volume == vd.Volume && vs.DiskState != "" {
					vol.State = &VolumeState{DiskState: vs.DiskState}
				}
				if vs.Volume == vd.Volume && vs.SizeKiB != 0 {
					vol.UsableSizeKiB = vs.SizeKiB // what DRBD reports: behind the definition during a resize
				}
				if vs.Volume == vd.Volume && vol.LayerDataList[0].Data != nil && vs.DiskState != "" {
					vol.LayerDataList[0].Data["disk_state"] = vs.DiskState
				}
			}
		}
		if d := vol.LayerDataList[0].Data; d != nil {
			d["allocated_size_kib"], d["usable_size_kib"] = vol.AllocatedSizeKiB, vol.UsableSizeKiB
		}
		out.Volumes = append(out.Volumes, vol)
	}
	return out
}

// millis is t in Unix milliseconds, 0 for the zero time (views written before the
// time was kept).
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// resourcesOf renders the replicas of rd passing the node filter, by node name. A
// replica on a node that is not online has no state (LINSTOR's Unknown): its agent's
// last report may be long out of date, its host gone.
func resourcesOf(v *projections.View, rd projections.ResourceDefinition, nodes map[string]bool, online onlineNodes) ([]Resource, error) {
	observed, err := v.ResourceStatus(rd.Name)
	if err != nil {
		return nil, err
	}
	out := make([]Resource, 0, len(rd.Replicas))
	for _, rep := range rd.Replicas {
		if !matches(nodes, rep.Node) {
			continue
		}
		var st *drbd.Status
		if s, ok := observed[rep.Node]; ok {
			up, err := online.of(v, rep.Node)
			if err != nil {
				return nil, err
			}
			if up {
				st = &s
			}
		}
		out = append(out, resourceOf(rd, rep, st))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeName < out[j].NodeName })
	return out, nil
}

// onlineNodes remembers, for one answer, which nodes are online (a list of 30,000
// resources on a dozen nodes reads each node once, not once per replica).
type onlineNodes map[string]bool

func (o onlineNodes) of(v *projections.View, node string) (bool, error) {
	if up, ok := o[node]; ok {
		return up, nil
	}
	n, _, err := v.Node(node)
	if err != nil {
		return false, err
	}
	o[node] = n.Status.State == events.StateOnline
	return o[node], nil
}

// viewResources serves every resource, by definition then node, filtered by ?nodes= and
// ?resources= and paged by ?offset=&limit=. It walks the definitions one at a time:
// named definitions are read directly, a page stops the walk once full, definitions
// before the page are only counted (no status read, nothing rendered), and an unpaged
// list is written as it is built, so memory stays bounded by one definition.
func (a *API) viewResources(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	nodes := queryList(q, "nodes")
	offset, limit := pageBounds(q)
	v, err := a.DB.Read()
	if err != nil {
		writeFailure(w, 0, objRsc, cairn.Errorf(cairn.CodeUnavailable, "views unreadable: %v", err))
		return
	}
	defer v.Close()
	out, online := &arrayWriter{w: w}, onlineNodes{}
	seen, emitted := 0, 0
	visit := func(rd projections.ResourceDefinition) (bool, error) {
		n := 0
		for _, rep := range rd.Replicas {
			if matches(nodes, rep.Node) {
				n++
			}
		}
		if seen+n <= offset {
			seen += n
			return true, nil
		}
		rs, err := resourcesOf(v, rd, nodes, online)
		if err != nil {
			return false, err
		}
		for _, res := range rs {
			if seen >= offset && (limit == 0 || emitted < limit) {
				if err := out.add(res); err != nil {
					return false, err
				}
				emitted++
			}
			seen++
		}
		return limit == 0 || emitted < limit, nil
	}
	walk := func() error { return eachDefinition(v, q, visit) }
	if offset > 0 && len(nodes) == 0 && len(queryList(q, "resources")) == 0 {
		// A page deep in the whole list: skip to it over the replica counts, without
		// decoding a definition before it (O(limit) but for a scan of 8-byte counts).
		from, before, err := v.SkipReplicas(offset)
		if err != nil {
			writeFailure(w, 0, objRsc, err)
			return
		}
		if from == "" {
			out.close()
			return
		}
		seen = before
		walk = func() error { return v.EachResourceDefinitionFrom(from, visit) }
	}
	if err := walk(); err != nil {
		if !out.started {
			writeFailure(w, 0, objRsc, err)
		}
		return // mid-stream: the client sees a truncated body
	}
	out.close()
}

// eachDefinition walks the definitions a ?resources= filter names (read directly when
// every name is there as given; else a scan matching names in any case), or all of
// them, in name order.
func eachDefinition(v *projections.View, q url.Values, fn func(projections.ResourceDefinition) (bool, error)) error {
	filter := queryList(q, "resources")
	if len(filter) == 0 {
		return v.EachResourceDefinition(fn)
	}
	var direct []projections.ResourceDefinition
	for _, raw := range q["resources"] {
		for _, name := range strings.Split(raw, ",") {
			if name = strings.TrimSpace(name); name == "" {
				continue
			}
			rd, ok, err := v.ResourceDefinition(name)
			if err != nil {
				return err
			}
			if !ok {
				return v.EachResourceDefinition(func(rd projections.ResourceDefinition) (bool, error) {
					if !matches(filter, rd.Name) {
						return true, nil
					}
					return fn(rd)
				})
			}
			direct = append(direct, rd)
		}
	}
	sort.Slice(direct, func(i, j int) bool { return direct[i].Name < direct[j].Name })
	for i, rd := range direct {
		if i > 0 && rd.Name == direct[i-1].Name {
			continue
		}
		if more, err := fn(rd); err != nil || !more {
			return err
		}
	}
	return nil
}

// arrayWriter writes a JSON array element by element; the status and header go out with
// the first element (or at close, for an empty array).
type arrayWriter struct {
	w       http.ResponseWriter
	started bool
}

func (a *arrayWriter) add(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	sep := ","
	if !a.started {
		a.w.Header().Set("Content-Type", "application/json")
		a.w.WriteHeader(http.StatusOK)
		a.started, sep = true, "["
	}
	if _, err := io.WriteString(a.w, sep); err != nil {
		return err
	}
	_, err = a.w.Write(b)
	return err
}

// streamPage streams one page (LINSTOR's offset and limit) of a list walked by each in
// its stable order: the items before offset are counted, not encoded, and nothing past
// the page is read. each calls emit for every item of the list; emit reports whether to go on.
func (a *API) streamPage(w http.ResponseWriter, r *http.Request, obj uint64, each func(v *projections.View, emit func(any) (bool, error)) error) {
	offset, limit := pageBounds(r.URL.Query())
	v, err := a.DB.Read()
	if err != nil {
		writeFailure(w, 0, obj, cairn.Errorf(cairn.CodeUnavailable, "views unreadable: %v", err))
		return
	}
	defer v.Close()
	out := &arrayWriter{w: w}
	seen, emitted := 0, 0
	err = each(v, func(item any) (bool, error) {
		if seen++; seen <= offset {
			return true, nil
		}
		if err := out.add(item); err != nil {
			return false, err
		}
		emitted++
		return limit == 0 || emitted < limit, nil
	})
	if err != nil {
		if !out.started {
			writeFailure(w, 0, obj, err)
		}
		return // mid-stream: the client sees a truncated body
	}
	out.close()
}

func (a *arrayWriter) close() {
	if !a.started {
		writeJSON(a.w, http.StatusOK, []any{})
		return
	}
	_, _ = io.WriteString(a.w, "]\n")
}

func (a *API) listResources(w http.ResponseWriter, r *http.Request) {
	name, q := r.PathValue("rd"), r.URL.Query()
	a.withView(w, objRsc, func(v *projections.View) (any, error) {
		rd, err := definition(v, name)
		if err != nil {
			return nil, err
		}
		out, err := resourcesOf(v, rd, queryList(q, "nodes"), onlineNodes{})
		return page(q, out), err
	})
}

// resourceOn reads one resource or answers not_found about it.
func resourceOn(v *projections.View, name, node string) (Resource, error) {
	rd, err := definition(v, name)
	if err != nil {
		return Resource{}, err
	}
	rs, err := resourcesOf(v, rd, map[string]bool{strings.ToLower(node): true}, onlineNodes{})
	if err == nil && len(rs) == 0 {
		err = notFound(cairn.ObjResource, "resource %s has no replica on node %s", name, node)
	}
	if err != nil {
		return Resource{}, err
	}
	return rs[0], nil
}

func (a *API) getResource(w http.ResponseWriter, r *http.Request) {
	name, node := r.PathValue("rd"), r.PathValue("node")
	a.withView(w, objRsc, func(v *projections.View) (any, error) { return resourceOn(v, name, node) })
}

func (a *API) listVolumes(w http.ResponseWriter, r *http.Request) {
	name, node := r.PathValue("rd"), r.PathValue("node")
	a.withView(w, objVlm, func(v *projections.View) (any, error) {
		res, err := resourceOn(v, name, node)
		if res.Volumes == nil {
			res.Volumes = []Volume{}
		}
		return res.Volumes, err
	})
}

// getVolume serves one volume of a resource by its number.
func (a *API) getVolume(w http.ResponseWriter, r *http.Request) {
	name, node, nr := r.PathValue("rd"), r.PathValue("node"), r.PathValue("nr")
	a.withView(w, objVlm, func(v *projections.View) (any, error) {
		res, err := resourceOn(v, name, node)
		if err != nil {
			return nil, err
		}
		for _, vol := range res.Volumes {
			if strconv.Itoa(vol.VolumeNumber) == nr {
				return vol, nil
			}
		}
		return nil, cairn.Errorf(cairn.CodeNotFound, "resource %s on node %s has no volume %s", name, node, nr) // FAIL_NOT_FOUND_VLM
	})
}

// resourceCreate is one entry of LINSTOR's resource create.
type resourceCreate struct {
	Resource struct {
		NodeName string            `json:"node_name"`
		Flags    []string          `json:"flags"`
		Props    map[string]string `json:"props"`
	} `json:"resource"`
	DrbdDiskless bool `json:"drbd_diskless"`
}

// createResources maps each entry to replica.add on its node (diskless with the
// DISKLESS or DRBD_DISKLESS flag; the pool from StorPoolName), one command each.
func (a *API) createResources(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("rd")
	var in []resourceCreate
	if !readBody(w, r, &in) {
		return
	}
	var out []ApiCallRc
	for _, c := range in {
		rcs, err := a.addReplica(r, name, c)
		if err != nil {
			writeResults(w, append(out, fromError(opCreate, objRsc, err)))
			return
		}
		out = append(out, rcs...)
	}
	writeResults(w, out)
}

// createResourceOnNode is LINSTOR's resource create on the node the path names (one
// ResourceCreate; a node_name in the body, if any, must be that node).
func (a *API) createResourceOnNode(w http.ResponseWriter, r *http.Request) {
	name, node := r.PathValue("rd"), r.PathValue("node")
	var in resourceCreate
	if !readBody(w, r, &in) {
		return
	}
	if in.Resource.NodeName != "" && !strings.EqualFold(in.Resource.NodeName, node) {
		writeFailure(w, opCreate, objRsc, cairn.InvalidField("resource.node_name", "the body names node %s, the path node %s", in.Resource.NodeName, node))
		return
	}
	in.Resource.NodeName = node
	rcs, err := a.addReplica(r, name, in)
	if err != nil {
		writeFailure(w, opCreate, objRsc, err)
		return
	}
	writeResults(w, rcs)
}

// addReplica sends replica.add for one LINSTOR resource create.
func (a *API) addReplica(r *http.Request, name string, c resourceCreate) ([]ApiCallRc, error) {
	node := c.Resource.NodeName
	cmd := map[string]any{"resource": name, "node": node}
	if c.DrbdDiskless || slices.ContainsFunc(c.Resource.Flags, func(f string) bool {
		return strings.EqualFold(f, "DISKLESS") || strings.EqualFold(f, "DRBD_DISKLESS")
	}) {
		cmd["diskless"] = true
	} else if pool := c.Resource.Props["StorPoolName"]; pool != "" {
		cmd["storage_pool"] = pool
	}
	reply, err := a.command(r, "replica.add", cmd)
	if err != nil {
		return nil, err
	}
	return results(success(opCreate, objRsc, fmt.Sprintf("Resource '%s' on node %s created.", name, node), map[string]string{"RscDfn": name, "Node": node}), reply, opCreate, objRsc), nil
}

// deleteResource maps to replica.remove. A resource that does not exist answers 200
// with a warning, as LINSTOR does (linstor-csi relies on it).
func (a *API) deleteResource(w http.ResponseWriter, r *http.Request) {
	name, node := r.PathValue("rd"), r.PathValue("node")
	cmd := map[string]any{"resource": name, "node": node}
	if k := r.URL.Query().Get("keep_tiebreaker"); k != "" { // LINSTOR's query parameter
		cmd["keep_tiebreaker"] = strings.EqualFold(k, "true")
	}
	reply, err := a.command(r, "replica.remove", cmd)
	if cairn.ErrorCode(err) == cairn.CodeNotFound {
		e := rc(maskWarn, opDelete, objRsc, codeWarnNotFound, "Resource '"+name+"' on node '"+node+"' not found.")
		e.Details = cairn.AsError(err).Message
		writeResults(w, []ApiCallRc{e})
		return
	}
	if err != nil {
		writeFailure(w, opDelete, objRsc, err)
		return
	}
	writeResults(w, results(success(opDelete, objRsc, fmt.Sprintf("Resource '%s' on node %s deleted.", name, node), map[string]string{"RscDfn": name, "Node": node}), reply, opDelete, objRsc))
}

// autoplace maps to replica.add without a node: place_count diskful replicas in all
// (additional_place_count: that many more than the definition has), the pool from
// storage_pool; diskless_on_remaining then adds a diskless replica on every other
// online node.
func (a *API) autoplace(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("rd")
	var in struct {
		DisklessOnRemaining bool             `json:"diskless_on_remaining"`
		SelectFilter        AutoSelectFilter `json:"select_filter"`
	}
	if !readBody(w, r, &in) {
		return
	}
	f := in.SelectFilter
	if err := checkLayers(f.LayerStack); err != nil {
		writeFailure(w, opCreate, objRsc, err)
		return
	}
	rd, err := a.definitionNow(name)
	if err != nil {
		writeFailure(w, opCreate, objRsc, err)
		return
	}
	cmd := map[string]any{"resource": name}
	switch {
	case f.AdditionalPlaceCount.Set:
		disks := 0
		for _, rep := range rd.Replicas {
			if !rep.Diskless {
				disks++
			}
		}
		cmd["place_count"] = disks + f.AdditionalPlaceCount.Value
	case f.PlaceCount.Set:
		cmd["place_count"] = f.PlaceCount.Value
	}
	if pools := f.pools(); len(pools) == 1 {
		cmd["storage_pool"] = pools[0]
	}
	filter, err := f.autoplaceFilter()
	if err != nil {
		writeFailure(w, opCreate, objRsc, err)
		return
	}
	if filter != nil {
		cmd["filter"] = filter
	}
	reply, err := a.command(r, "replica.add", cmd)
	if err != nil {
		writeFailure(w, opCreate, objRsc, err)
		return
	}
	out := results(success(opCreate, objRsc, fmt.Sprintf("Resource '%s' successfully autoplaced.", name), map[string]string{"RscDfn": name}), reply, opCreate, objRsc)
	if in.DisklessOnRemaining || f.DisklessOnRemaining {
		out = append(out, a.disklessOnRemaining(r, name)...)
	}
	writeResults(w, out)
}

// disklessOnRemaining adds a diskless replica of name on every online storage node
// without one.
func (a *API) disklessOnRemaining(r *http.Request, name string) []ApiCallRc {
	var rd projections.ResourceDefinition
	var nodes []projections.Node
	err := a.read(func(v *projections.View) (err error) {
		if rd, err = definition(v, name); err == nil {
			nodes, err = v.Nodes()
		}
		return err
	})
	if err != nil {
		return []ApiCallRc{fromError(opCreate, objRsc, err)}
	}
	var out []ApiCallRc
	for _, n := range nodes {
		if _, has := rd.Replica(n.Spec.Name); has || n.Status.State != "online" {
			continue
		}
		if _, err := a.command(r, "replica.add", map[string]any{"resource": name, "node": n.Spec.Name, "diskless": true}); err != nil {
			return append(out, fromError(opCreate, objRsc, err))
		}
		out = append(out, success(opCreate, objRsc, fmt.Sprintf("Diskless resource '%s' on node %s created.", name, n.Spec.Name), map[string]string{"RscDfn": name, "Node": n.Spec.Name}))
	}
	return out
}

// makeAvailable makes a resource usable on a node: nothing when it is there (a diskless
// one gets a disk when diskful is asked), else a new replica, diskless unless diskful.
func (a *API) makeAvailable(w http.ResponseWriter, r *http.Request) {
	name, node := r.PathValue("rd"), r.PathValue("node")
	var in struct {
		Diskful bool `json:"diskful"`
	}
	if !readBody(w, r, &in) {
		return
	}
	rd, err := a.definitionNow(name)
	if err != nil {
		writeFailure(w, opCreate, objRsc, err)
		return
	}
	refs := map[string]string{"RscDfn": name, "Node": node}
	if rep, ok := rd.Replica(node); ok {
		if rep.Tiebreaker && !in.Diskful { // LINSTOR turns a tiebreaker into a wanted diskless replica
			a.commit(w, r, "replica.add", map[string]any{"resource": name, "node": node, "diskless": true}, opModify, objRsc,
				fmt.Sprintf("Tiebreaker of resource '%s' on node %s is now a diskless resource.", name, node), refs)
			return
		}
		if !in.Diskful || !rep.Diskless {
			e := rc(maskInfo, opCreate, objRsc, codeInfoNoop, "Resource '"+name+"' is already available on node "+node+".")
			e.ObjRefs = refs
			writeResults(w, []ApiCallRc{e})
			return
		}
		reply, err := a.command(r, "replica.toggle-disk", map[string]any{"resource": name, "node": node, "diskless": false})
		if err != nil {
			writeFailure(w, opModify, objRsc, err)
			return
		}
		writeResults(w, results(success(opModify, objRsc, fmt.Sprintf("Resource '%s' on node %s got a disk.", name, node), refs), reply, opModify, objRsc))
		return
	}
	a.commit(w, r, "replica.add", map[string]any{"resource": name, "node": node, "diskless": !in.Diskful}, opCreate, objRsc, fmt.Sprintf("Resource '%s' on node %s made available.", name, node), refs)
}

// toggleDisk maps to replica.toggle-disk (the pool from the path, if any).
func (a *API) toggleDisk(diskless bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, node := r.PathValue("rd"), r.PathValue("node")
		cmd := map[string]any{"resource": name, "node": node, "diskless": diskless}
		if pool := r.PathValue("pool"); pool != "" && !diskless {
			cmd["storage_pool"] = pool
		}
		reply, err := a.command(r, "replica.toggle-disk", cmd)
		if err != nil {
			writeFailure(w, opModify, objRsc, err)
			return
		}
		writeResults(w, results(success(opModify, objRsc, fmt.Sprintf("Resource '%s' on node %s toggled.", name, node), map[string]string{"RscDfn": name, "Node": node}), reply, opModify, objRsc))
	}
}

// migrateDisk maps LINSTOR's migrate-disk (toggle-disk --migrate-from) to
// replica.migrate: a disk on node (its diskless replica's, or a new replica's) replaces
// the one on fromnode, which the evacuation policy removes once the new one is UpToDate.
func (a *API) migrateDisk(w http.ResponseWriter, r *http.Request) {
	name, node, from := r.PathValue("rd"), r.PathValue("node"), r.PathValue("fromnode")
	cmd := map[string]any{"resource": name, "node": node, "from": from}
	if pool := r.PathValue("pool"); pool != "" {
		cmd["storage_pool"] = pool
	}
	reply, err := a.command(r, "replica.migrate", cmd)
	if err != nil {
		writeFailure(w, opModify, objRsc, err)
		return
	}
	writeResults(w, results(success(opModify, objRsc, fmt.Sprintf("Resource '%s' on node %s gets the disk of %s; the one on %s is removed once it is UpToDate.", name, node, from, from),
		map[string]string{"RscDfn": name, "Node": node}), reply, opModify, objRsc))
}

// activation maps activate and deactivate of a resource on a node.
func (a *API) activation(verb string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, node := r.PathValue("rd"), r.PathValue("node")
		reply, err := a.command(r, verb, map[string]any{"resource": name, "node": node})
		if err != nil {
			writeFailure(w, opModify, objRsc, err)
			return
		}
		writeResults(w, results(success(opModify, objRsc, fmt.Sprintf("Resource '%s' on node %s %sd.", name, node, strings.TrimPrefix(verb, "resource.")), map[string]string{"RscDfn": name, "Node": node}), reply, opModify, objRsc))
	}
}

// modifyResource maps PUT …/resources/{node} (override_props, delete_props; linstor-gui,
// `linstor resource set-property`) to replica.modify: DrbdOptions/* are the replica's
// own DRBD options (over every broader level, on its node only), the rest free-form
// properties. A namespace delete answers 501.
func (a *API) modifyResource(w http.ResponseWriter, r *http.Request) {
	rd, node := r.PathValue("rd"), r.PathValue("node")
	var in propsModify
	if !readBody(w, r, &in) {
		return
	}
	if len(in.DeleteNamespaces) > 0 {
		e := rc(maskError, opModify, objRsc, codeImplError, "Cairn does not delete resource property namespaces; name the properties")
		writeRCs(w, http.StatusNotImplemented, []ApiCallRc{e})
		return
	}
	cmd, err := modifyCommand(map[string]any{"resource": rd, "node": node}, in.OverrideProps, in.DeleteProps)
	if err != nil {
		writeFailure(w, opModify, objRsc, err)
		return
	}
	if len(cmd) == 2 {
		writeResults(w, []ApiCallRc{rc(maskWarn, opModify, objRsc, codeNoEffect, "nothing to change in resource "+rd+" on "+node)})
		return
	}
	a.commit(w, r, "replica.modify", cmd, opModify, objRsc, fmt.Sprintf("Resource '%s' on node '%s' modified.", rd, node), map[string]string{"RscDfn": rd, "Node": node})
}
