package decide

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
)

// PatchMap works out what a patch of string properties changes on current: the keys
// set to a new value and the keys removed that were there (sorted). A key both set and
// removed is invalid_argument naming unsetField[i]. An empty result changes nothing.
func PatchMap(current, set map[string]string, unset []string, unsetField string) (map[string]string, []string, error) {
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

// FilesystemTypeKey is LINSTOR's FileSystem/Type (on a volume definition, definition or
// group): the filesystem the first diskful node makes on a new volume.
const FilesystemTypeKey = "FileSystem/Type"

// FreeProperties checks the free-form properties of a definition or group: DRBD options
// go in drbd_options, never among them (invalid_argument naming field; LINSTOR's own
// DrbdOptions/ settings, LINSTORLevelOptions, are free-form); DrbdOptions/auto-quorum
// and FileSystem/Type take only the values Cairn acts on; an object has at most 128.
func FreeProperties(current, set map[string]string, removed []string, field string) error {
	for k, v := range set {
		if strings.HasPrefix(k, "DrbdOptions/") && !LINSTORLevelOptions[k] {
			return cairn.InvalidField(field, "%s is a DRBD option: set it in drbd_options", k)
		}
		if k == drbd.AutoQuorumKey && !drbd.ValidAutoQuorum(v) {
			return cairn.InvalidField(field+"."+k, "%s is %q; it takes io-error, suspend-io or disabled", k, v)
		}
		if k == FilesystemTypeKey && v != drbd.FilesystemExt4 && v != drbd.FilesystemXFS {
			return cairn.InvalidField(field+"."+k, "%s is %q; Cairn makes ext4 or xfs", k, v)
		}
	}
	if n := len(current) + CountNew(current, set) - len(removed); n > 128 {
		return cairn.InvalidField(field, "at most 128 properties, this makes %d", n)
	}
	return nil
}

func CountNew(current, set map[string]string) int {
	n := 0
	for k := range set {
		if _, has := current[k]; !has {
			n++
		}
	}
	return n
}

// DecidePropertiesPatch patches the free-form properties of the object name (a kind, for
// messages): the keys set and removed that change something, or nil and a warning when
// nothing changes.
// Refuses invalid_argument for a key both set and removed (unset_properties[i]), a DRBD
// option among them, or more than 128.
func DecidePropertiesPatch(name, kind string, current, set map[string]string, unset []string) (*events.PropertiesChanged, []string, error) {
	changed, removed, err := PatchMap(current, set, unset, "unset_properties")
	if err != nil {
		return nil, nil, err
	}
	if err := FreeProperties(current, changed, removed, "properties"); err != nil {
		return nil, nil, err
	}
	if len(changed) == 0 && len(removed) == 0 {
		return nil, []string{kind + " " + name + " already has these properties; nothing changed"}, nil
	}
	return &events.PropertiesChanged{Name: name, Set: changed, Unset: removed}, nil, nil
}

// OptionsPatch reports whether setting set and unsetting unset changes current.
// Refuses invalid_argument (unset[i]) for an option both set and unset, or a name that
// is no option.
func OptionsPatch(current, set drbd.Options, unset []string) (bool, error) {
	next, err := drbd.Resolve(current, set).Without(unset)
	if err != nil {
		return false, err
	}
	both := drbd.Resolve(set)
	for i, n := range unset {
		if without, _ := both.Without([]string{n}); !reflect.DeepEqual(without, both) {
			return false, cairn.InvalidField(fmt.Sprintf("unset[%d]", i), "%s is both set and unset", n)
		}
	}
	return !reflect.DeepEqual(next, drbd.Resolve(current)), nil
}
