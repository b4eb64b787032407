package commands

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-io/cairn"
)

// patchMap works out what a patch of string properties changes on current: the keys
// set to a new value and the keys removed that were there (sorted). A key both set and
// removed is invalid_argument naming unsetField[i]. An empty result changes nothing.
func patchMap(current, set map[string]string, unset []string, unsetField string) (map[string]string, []string, error) {
	var removed []string
	for i, k := range unset {
		if _, both := set[k]; both {
			return nil, nil, cairn.InvalidField(fmt.Sprintf("%s[%d]", unsetField, i), "%s is both set and removed", k)
		}
		if _, has := current[k]; has {
			removed = append(removed, k)
		}
	}
	var changed map[string]string
	for k, v := range set {
		if old, has := current[k]; !has || old != v {
			if changed == nil {
				changed = map[string]string{}
			}
			changed[k] = v
		}
	}
	slices.Sort(removed)
	return changed, removed, nil
}

// LINSTORLevelOptions are LINSTOR's own settings under DrbdOptions/ (no DRBD section:
// they steer the controller, not drbd.conf). Cairn keeps them as free-form properties
// at every level, shown as given, so the clients that set them (piraeus-operator,
// linstor-proxmox) are not refused; other DrbdOptions/ keys are DRBD options.
var LINSTORLevelOptions = map[string]bool{
	"DrbdOptions/ExactSize":                     true,
	"DrbdOptions/auto-quorum":                   true,
	"DrbdOptions/auto-add-quorum-tiebreaker":    true,
	"DrbdOptions/auto-diskful":                  true,
	"DrbdOptions/auto-diskful-allow-cleanup":    true,
	"DrbdOptions/auto-verify-algo":              true,
	"DrbdOptions/auto-verify-algo-allowed-list": true,
	"DrbdOptions/auto-verify-algo-disable":      true,
	"DrbdOptions/AutoEvictAfterTime":            true,
	"DrbdOptions/AutoEvictMaxDisconnectedNodes": true,
	"DrbdOptions/AutoEvictMinReplicaCount":      true,
	"DrbdOptions/AutoEvictAllowEviction":        true,
}

// freeProperties checks the free-form properties of a definition or group: DRBD options
// go in drbd_options, never among them (invalid_argument naming field; LINSTOR's own
// DrbdOptions/ settings, LINSTORLevelOptions, are free-form), and an object has at most
// 128.
func freeProperties(current, set map[string]string, removed []string, field string) error {
	for k := range set {
		if strings.HasPrefix(k, "DrbdOptions/") && !LINSTORLevelOptions[k] {
			return cairn.InvalidField(field, "%s is a DRBD option: set it in drbd_options", k)
		}
	}
	if n := len(current) + countNew(current, set) - len(removed); n > 128 {
		return cairn.InvalidField(field, "at most 128 properties, this makes %d", n)
	}
	return nil
}

func countNew(current, set map[string]string) int {
	n := 0
	for k := range set {
		if _, has := current[k]; !has {
			n++
		}
	}
	return n
}
