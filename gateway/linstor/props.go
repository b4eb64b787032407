package linstor

import (
	"sort"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn"
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

// optionsOf turns LINSTOR DrbdOptions/* properties into Cairn's drbd_options (a JSON
// object for the command; admission validates the values). A property outside
// DrbdOptions/ is an invalid_argument naming it: Cairn keeps no free-form properties on
// groups and definitions yet, and dropping one silently would lose it.
func optionsOf(props map[string]string) (map[string]any, error) {
	out := map[string]any{}
	extra := map[string]string{}
	for _, k := range sortedKeys(props) {
		v := props[k]
		name, typed := typedOptions[k]
		switch {
		case typed && (name == "allow_two_primaries" || name == "auto_promote"):
			b, ok := map[string]bool{"yes": true, "true": true, "no": false, "false": false}[strings.ToLower(v)]
			if !ok {
				return nil, cairn.InvalidField("drbd_options."+name, "%s must be yes or no, got %q", k, v)
			}
			out[name] = b
		case typed && (name == "max_buffers" || name == "al_extents"):
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, cairn.InvalidField("drbd_options."+name, "%s must be an integer, got %q", k, v)
			}
			out[name] = n
		case typed:
			out[name] = v
		case strings.HasPrefix(k, "DrbdOptions/"):
			extra[k] = v
		default:
			return nil, cairn.InvalidField("properties", "property %s: Cairn keeps DrbdOptions/* on resource groups and definitions, nothing else yet", k)
		}
	}
	if len(extra) > 0 {
		out["extra"] = extra
	}
	return out, nil
}

// unsetOf turns LINSTOR delete_props into rd.modify's unset names.
func unsetOf(keys []string) ([]string, error) {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		switch name, typed := typedOptions[k]; {
		case typed:
			out = append(out, name)
		case strings.HasPrefix(k, "DrbdOptions/"):
			out = append(out, k)
		default:
			return nil, cairn.InvalidField("unset", "property %s: Cairn keeps DrbdOptions/* on definitions, nothing else yet", k)
		}
	}
	return out, nil
}

// propsOf renders Cairn's DRBD options as LINSTOR properties.
func propsOf(o drbd.Options) map[string]string {
	out := map[string]string{}
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
