package linstor

import (
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/drbd"
)

// typedOptions maps the LINSTOR property of each DRBD option Cairn types to its name in
// Cairn's drbd_options (and rd.modify's unset). Every other DrbdOptions/<Section>/<name>
// travels as an untyped option and round-trips unchanged.
var typedOptions = map[string]string{
	"DrbdOptions/Net/protocol":            "protocol",
	"DrbdOptions/Net/allow-two-primaries": "allow_two_primaries",
	"DrbdOptions/Net/max-buffers":         "max_buffers",
	"DrbdOptions/Resource/auto-promote":   "auto_promote",
	"DrbdOptions/Resource/quorum":         "quorum",
	"DrbdOptions/Resource/on-no-quorum":   "on_no_quorum",
	"DrbdOptions/Disk/on-io-error":        "on_io_error",
	"DrbdOptions/Disk/al-extents":         "al_extents",
}

// drbdOptionKey is the shape of a DRBD option's LINSTOR property (schemas/defs.json).
var drbdOptionKey = regexp.MustCompile(`^DrbdOptions/(Net|Disk|Options|Resource|PeerDevice)/[a-z][a-z0-9-]*$`)

// optionsOf splits LINSTOR properties into Cairn's drbd_options (DrbdOptions/*, a JSON
// object for the command; admission validates the values) and the free-form properties
// (everything else, kept and shown as given). A typed option's value that is not what
// it takes is invalid_argument naming the option.
func optionsOf(props map[string]string) (opts map[string]any, free map[string]string, err error) {
	opts, free = map[string]any{}, map[string]string{}
	extra := map[string]string{}
	for _, k := range sortedKeys(props) {
		v := props[k]
		name, typed := typedOptions[k]
		switch {
		case typed && (name == "allow_two_primaries" || name == "auto_promote"):
			b, ok := map[string]bool{"yes": true, "true": true, "no": false, "false": false}[strings.ToLower(v)]
			if !ok {
				return nil, nil, cairn.InvalidField("drbd_options."+name, "%s must be yes or no, got %q", k, v)
			}
			opts[name] = b
		case typed && (name == "max_buffers" || name == "al_extents"):
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, nil, cairn.InvalidField("drbd_options."+name, "%s must be an integer, got %q", k, v)
			}
			opts[name] = n
		case typed:
			opts[name] = v
		case decide.LINSTORLevelOptions[k]:
			free[k] = v
		case strings.HasPrefix(k, "DrbdOptions/") && !drbdOptionKey.MatchString(k):
			return nil, nil, cairn.InvalidField("drbd_options.extra", "%s is neither a DRBD option (DrbdOptions/<Net|Disk|Options|Resource|PeerDevice>/<name>) nor one of LINSTOR's own settings Cairn keeps (%s)",
				k, strings.Join(slices.Sorted(maps.Keys(decide.LINSTORLevelOptions)), ", "))
		case strings.HasPrefix(k, "DrbdOptions/"):
			extra[k] = v
		default:
			free[k] = v
		}
	}
	if len(extra) > 0 {
		opts["extra"] = extra
	}
	return opts, free, nil
}

// unsetOf splits LINSTOR delete_props into rd.modify's unset (DRBD options) and
// unset_properties (free-form).
func unsetOf(keys []string) (options, free []string) {
	for _, k := range keys {
		switch name, typed := typedOptions[k]; {
		case typed:
			options = append(options, name)
		case decide.LINSTORLevelOptions[k]:
			free = append(free, k)
		case strings.HasPrefix(k, "DrbdOptions/"):
			options = append(options, k)
		default:
			free = append(free, k)
		}
	}
	return options, free
}

// withProperties adds the free-form properties to a command body.
func withProperties(cmd map[string]any, opts map[string]any, free map[string]string) map[string]any {
	if len(opts) > 0 {
		cmd["drbd_options"] = opts
	}
	if len(free) > 0 {
		cmd["properties"] = free
	}
	return cmd
}

// propsOf renders Cairn's DRBD options and free-form properties as LINSTOR properties.
func propsOf(o drbd.Options, free map[string]string) map[string]string {
	out := maps.Clone(free)
	if out == nil {
		out = map[string]string{}
	}
	yesNo := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	set := func(name, value string) {
		for k, n := range typedOptions {
			if n == name {
				out[k] = value
			}
		}
	}
	if o.Protocol != nil {
		set("protocol", *o.Protocol)
	}
	if o.AllowTwoPrimaries != nil {
		set("allow_two_primaries", yesNo(*o.AllowTwoPrimaries))
	}
	if o.MaxBuffers != nil {
		set("max_buffers", strconv.Itoa(*o.MaxBuffers))
	}
	if o.AutoPromote != nil {
		set("auto_promote", yesNo(*o.AutoPromote))
	}
	if o.Quorum != nil {
		set("quorum", *o.Quorum)
	}
	if o.OnNoQuorum != nil {
		set("on_no_quorum", *o.OnNoQuorum)
	}
	if o.OnIOError != nil {
		set("on_io_error", *o.OnIOError)
	}
	if o.ALExtents != nil {
		set("al_extents", strconv.Itoa(*o.ALExtents))
	}
	for k, v := range o.Extra {
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// propsModify is LINSTOR's body of a properties change (controller, key-value store,
// resource, volume definition): set these, delete those, delete every key under these
// namespaces.
type propsModify struct {
	OverrideProps    map[string]string `json:"override_props"`
	DeleteProps      []string          `json:"delete_props"`
	DeleteNamespaces []string          `json:"delete_namespaces"`
}
