package linstor

import (
	"net/http"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/resources"
	"github.com/cairn-io/cairn/projections"
)

// SpaceInfo is LINSTOR's QuerySizeInfoResponseSpaceInfo.
type SpaceInfo struct {
	MaxVlmSizeInKiB   uint64            `json:"max_vlm_size_in_kib"`
	AvailableSizeKiB  uint64            `json:"available_size_in_kib"`
	CapacityInKiB     uint64            `json:"capacity_in_kib"`
	DefaultMaxOversub float64           `json:"default_max_oversubscription_ratio"`
	NextSpawnResult   []NextSpawnResult `json:"next_spawn_result"`
}

// NextSpawnResult is LINSTOR's QuerySizeInfoSpawnResult: a node and pool the next spawn
// would take.
type NextSpawnResult struct {
	NodeName     string `json:"node_name"`
	StorPoolName string `json:"stor_pool_name"`
}

// SizeInfo is LINSTOR's QuerySizeInfoResponse.
type SizeInfo struct {
	SpaceInfo SpaceInfo   `json:"space_info"`
	Reports   []ApiCallRc `json:"reports"`
}

// sizeInfoOf renders resources.GroupSpaceInfo for group: when fewer nodes qualify than
// the place count, the sizes are 0 and a warning says why (LINSTOR answers 200 then too).
func sizeInfoOf(v *projections.View, group string) (SizeInfo, error) {
	si, err := resources.GroupSpaceInfo(v, group)
	if err != nil {
		return SizeInfo{}, err
	}
	out := SizeInfo{SpaceInfo: SpaceInfo{MaxVlmSizeInKiB: si.MaxVolumeKiB, AvailableSizeKiB: si.AvailableKiB,
		CapacityInKiB: si.CapacityKiB, DefaultMaxOversub: projections.DefaultOverprovision, NextSpawnResult: []NextSpawnResult{}},
		Reports: []ApiCallRc{}}
	for _, c := range si.Next {
		out.SpaceInfo.NextSpawnResult = append(out.SpaceInfo.NextSpawnResult, NextSpawnResult{NodeName: c.Node, StorPoolName: c.Pool.Name})
	}
	if si.Short != nil {
		out.Reports = append(out.Reports, rc(maskWarn, 0, objRscGrp, codeNotEnoughNodes, si.Short.Error()))
	}
	return out, nil
}

// querySizeInfo answers POST /v1/resource-groups/{rg}/query-size-info (`linstor
// resource-group query-size-info`): what the group's next spawn could take. A select
// filter in the body is not applied: the group's own rules are.
func (a *API) querySizeInfo(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("rg")
	a.withView(w, objRscGrp, func(v *projections.View) (any, error) {
		return sizeInfoOf(v, group)
	})
}

// queryAllSizeInfo answers POST /v1/queries/resource-groups/query-all-size-info: every
// group's size info by name, which linstor-proxmox reads for each storage's total and
// free space (LINSTORPlugin.pm status: space_info.capacity_in_kib and
// available_size_in_kib; a group missing from result is an inactive storage).
func (a *API) queryAllSizeInfo(w http.ResponseWriter, r *http.Request) {
	a.withView(w, objRscGrp, func(v *projections.View) (any, error) {
		result := map[string]SizeInfo{}
		err := v.EachResourceGroup(func(g projections.ResourceGroup) (bool, error) {
			si, err := sizeInfoOf(v, g.Name)
			if cairn.ErrorCode(err) == cairn.CodePreconditionFailed { // no cluster yet
				return false, nil
			}
			result[g.Name] = si
			return err == nil, err
		})
		return map[string]any{"result": result, "reports": []ApiCallRc{}}, err
	})
}
