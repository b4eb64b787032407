package policy

// Auto-diskful: a diskless replica that has been Primary longer than
// DrbdOptions/auto-diskful minutes gets a disk on its node (replica.toggle-disk); with
// DrbdOptions/auto-diskful-allow-cleanup, a disk above the place count is removed again
// once the new one is UpToDate.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/projections"
)

// LINSTOR's auto-diskful settings (controller, group or definition property; the
// definition's wins, then the group's).
const (
	PropAutoDiskful        = "DrbdOptions/auto-diskful"               // minutes
	PropAutoDiskfulCleanup = "DrbdOptions/auto-diskful-allow-cleanup" // true: remove a surplus disk afterwards
)

// DiskfulDefinition is one definition the auto-diskful policy looks at: its replicas'
// reports, its effective settings and its group's place count.
type DiskfulDefinition struct {
	RD         projections.ResourceDefinition
	Statuses   map[string]drbd.Status
	After      time.Duration // DrbdOptions/auto-diskful
	Cleanup    bool          // DrbdOptions/auto-diskful-allow-cleanup
	PlaceCount int
	// Toggled: this policy gave a replica of the definition its disk (only then does
	// cleanup remove one: a disk the operator added stays).
	Toggled bool
}

// Actions of a DiskfulStep.
const (
	DiskfulToggle  = "toggle"  // replica.toggle-disk to diskful
	DiskfulWait    = "wait"    // Primary, not long enough yet (Due says when)
	DiskfulCleanup = "cleanup" // replica.remove of a surplus disk
)

// DiskfulStep is the auto-diskful policy's decision for one replica.
type DiskfulStep struct {
	Resource string    `json:"resource"`
	Node     string    `json:"node"`
	Action   string    `json:"action"`
	Reason   string    `json:"reason"`
	Due      time.Time `json:"due,omitzero"`
	// Incarnation is the replica's (command ids derive from it).
	Incarnation uint64 `json:"incarnation"`
}

// AutoDiskfulSettings reads the effective settings from the definition's, the group's
// and the controller's properties (the first that has a key wins). A missing or
// unreadable DrbdOptions/auto-diskful is off (0).
func AutoDiskfulSettings(rd, group, controller map[string]string) (after time.Duration, cleanup bool) {
	get := func(key string) (string, bool) {
		for _, props := range []map[string]string{rd, group, controller} {
			if v, ok := props[key]; ok {
				return v, true
			}
		}
		return "", false
	}
	if raw, ok := get(PropAutoDiskful); ok {
		if m, err := strconv.ParseFloat(strings.TrimSpace(raw), 64); err == nil && m > 0 {
			after = time.Duration(m * float64(time.Minute))
		}
	}
	raw, _ := get(PropAutoDiskfulCleanup)
	return after, strings.EqualFold(raw, "true")
}

// PlanAutoDiskful decides for every diskless replica (not a tiebreaker) that its node
// reports Primary: since (by "resource/node") is when this policy first saw it Primary,
// kept by the caller; a replica Primary for d.After gets a disk. With d.Cleanup, in a
// definition where it gave a disk (d.Toggled), once every disk is UpToDate and there are
// more disks than the place count, the disk of a replica that is not Primary goes (the
// highest node id among them). It returns the
// steps and the since entries to keep (replicas no longer Primary drop out).
func PlanAutoDiskful(defs []DiskfulDefinition, since map[string]time.Time, now time.Time) ([]DiskfulStep, map[string]time.Time) {
	keep := map[string]time.Time{}
	var out []DiskfulStep
	for _, d := range defs {
		if d.After <= 0 {
			continue
		}
		diskful, allUp := 0, true
		for _, r := range d.RD.Replicas {
			if !r.Diskless {
				diskful++
				allUp = allUp && projections.ReplicaUpToDate(d.RD, r, d.Statuses)
			}
		}
		for _, r := range d.RD.Replicas {
			st, ok := d.Statuses[r.Node]
			if !r.Diskless || r.Tiebreaker || !ok || st.Role != "Primary" || st.Incarnation != r.Incarnation {
				continue
			}
			key := d.RD.Name + "/" + r.Node
			first, seen := since[key]
			if !seen {
				first = now
			}
			keep[key] = first
			s := DiskfulStep{Resource: d.RD.Name, Node: r.Node, Incarnation: r.Incarnation, Due: first.Add(d.After)}
			if now.Before(s.Due) {
				s.Action, s.Reason = DiskfulWait, fmt.Sprintf("diskless and Primary since %s; a disk after %s=%s", first.UTC().Format(time.RFC3339), PropAutoDiskful, d.After)
			} else {
				s.Action, s.Reason = DiskfulToggle, fmt.Sprintf("diskless and Primary longer than %s=%s", PropAutoDiskful, d.After)
			}
			out = append(out, s)
		}
		if !d.Cleanup || !d.Toggled || !allUp || d.PlaceCount == 0 || diskful <= d.PlaceCount {
			continue
		}
		var surplus *projections.Replica
		for i := range d.RD.Replicas {
			r := &d.RD.Replicas[i]
			if !r.Diskless && d.Statuses[r.Node].Role != "Primary" && (surplus == nil || r.NodeID > surplus.NodeID) {
				surplus = r
			}
		}
		if surplus != nil {
			out = append(out, DiskfulStep{Resource: d.RD.Name, Node: surplus.Node, Incarnation: surplus.Incarnation, Action: DiskfulCleanup,
				Reason: fmt.Sprintf("%d disks, place count %d, all UpToDate (%s)", diskful, d.PlaceCount, PropAutoDiskfulCleanup)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Resource != out[j].Resource {
			return out[i].Resource < out[j].Resource
		}
		return out[i].Node < out[j].Node
	})
	return out, keep
}

// DiskfulRequest is the command a toggle or cleanup step calls for (ok false to wait).
func DiskfulRequest(s DiskfulStep) (admission.Request, bool) {
	inc := strconv.FormatUint(s.Incarnation, 10)
	switch s.Action {
	case DiskfulToggle:
		body := fmt.Appendf(nil, `{"resource":%q,"node":%q,"diskless":false}`, s.Resource, s.Node)
		return admission.Request{Verb: "replica.toggle-disk", Body: body, Actor: "policy:auto-diskful", ForgetRefusals: true,
			CommandID: commandID("auto-diskful", s.Resource, s.Node, inc)}, true
	case DiskfulCleanup:
		body := fmt.Appendf(nil, `{"resource":%q,"node":%q}`, s.Resource, s.Node)
		return admission.Request{Verb: "replica.remove", Body: body, Actor: "policy:auto-diskful", ForgetRefusals: true,
			CommandID: commandID("auto-diskful-cleanup", s.Resource, s.Node, inc)}, true
	}
	return admission.Request{}, false
}
