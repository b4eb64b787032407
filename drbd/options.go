package drbd

import (
	"errors"
	"maps"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn"
)

// Options are the DRBD options Cairn types, with pointer fields so that nil inherits
// and any set value, false and 0 included, overrides (see Resolve). Keys Cairn does not
// type travel in Extra as "DrbdOptions/<Section>/<name>" -> value and round-trip
// unchanged.
type Options struct {
	// net section
	Protocol          *string `json:"protocol,omitempty"` // A | B | C
	AllowTwoPrimaries *bool   `json:"allow_two_primaries,omitempty"`
	MaxBuffers        *int    `json:"max_buffers,omitempty"`
	// options section
	AutoPromote *bool   `json:"auto_promote,omitempty"`
	Quorum      *string `json:"quorum,omitempty"`       // off | majority | all | <n>
	OnNoQuorum  *string `json:"on_no_quorum,omitempty"` // io-error | suspend-io
	// disk section
	OnIOError *string `json:"on_io_error,omitempty"` // pass_on | call-local-io-error | detach
	ALExtents *int    `json:"al_extents,omitempty"`
	// Extra holds untyped options by their LINSTOR property name, e.g.
	// "DrbdOptions/Net/ping-timeout": "10".
	Extra map[string]string `json:"extra,omitempty"`
}

// Resolve merges option levels from the broadest to the narrowest: pass them as
// Resolve(controller, group, definition, resource). For every typed field the narrowest
// level that sets it wins; a nil field inherits, and a set value overrides whatever it
// is, false and 0 included. Extra is merged key by key, the narrowest level winning per
// key. The result shares no pointer or map with the inputs. Resolve does not validate;
// call Validate on the result.
func Resolve(levels ...Options) Options {
	var out Options
	for _, l := range levels {
		pick(&out.Protocol, l.Protocol)
		pick(&out.AllowTwoPrimaries, l.AllowTwoPrimaries)
		pick(&out.MaxBuffers, l.MaxBuffers)
		pick(&out.AutoPromote, l.AutoPromote)
		pick(&out.Quorum, l.Quorum)
		pick(&out.OnNoQuorum, l.OnNoQuorum)
		pick(&out.OnIOError, l.OnIOError)
		pick(&out.ALExtents, l.ALExtents)
		if len(l.Extra) > 0 && out.Extra == nil {
			out.Extra = make(map[string]string, len(l.Extra))
		}
		maps.Copy(out.Extra, l.Extra)
	}
	return out
}

// pick sets *dst to a copy of *src when src is set: a set value always overrides.
func pick[T any](dst **T, src *T) {
	if src != nil {
		v := *src
		*dst = &v
	}
}

// The sections of a DRBD resource file that options go into.
const (
	SectionNet     = "net"
	SectionOptions = "options"
	SectionDisk    = "disk"
)

// extraKey is the shape of an untyped option's name: DrbdOptions/<Namespace>/<option>.
var extraKey = regexp.MustCompile(`^DrbdOptions/(Net|Disk|Options|Resource|PeerDevice)/([a-z][a-z0-9-]*)$`)

// extraValue is what an untyped option's value may hold: one drbd.conf word, so that a
// value can never open or close a section or end a statement.
var extraValue = regexp.MustCompile(`^[A-Za-z0-9._:/+@%-]+$`)

// extraSections maps the LINSTOR namespaces of untyped options to the resource-file
// section drbdadm expects them in. Peer-device options (resync-rate, c-max-rate, …)
// are accepted by drbdadm in the resource-wide disk section; Options is an alias of
// Resource (resource options).
var extraSections = map[string]string{
	"Net":        SectionNet,
	"Disk":       SectionDisk,
	"PeerDevice": SectionDisk,
	"Options":    SectionOptions,
	"Resource":   SectionOptions,
}

// typedKeys are the drbd.conf names of the typed options, by section; an Extra key may
// not name one of them (the typed field is the one place to set it).
var typedKeys = map[string]string{
	"protocol":            "protocol",
	"allow-two-primaries": "allow_two_primaries",
	"max-buffers":         "max_buffers",
	"auto-promote":        "auto_promote",
	"quorum":              "quorum",
	"on-no-quorum":        "on_no_quorum",
	"on-io-error":         "on_io_error",
	"al-extents":          "al_extents",
}

// Limits drbdsetup 9.22 enforces (drbdsetup help new-peer / disk-options /
// resource-options).
const (
	minMaxBuffers = 32
	maxMaxBuffers = 131072
	minALExtents  = 67
	maxALExtents  = 65534
	maxQuorum     = 32
)

// Validate checks every set option against the values DRBD accepts and returns all
// violations joined (errors.Join of *cairn.Error, code invalid_argument, each naming
// the field as "options.<json name>" or "options.extra[<key>]"):
//   - protocol is A, B or C;
//   - quorum is off, majority, all or an integer 1..32;
//   - on_no_quorum is io-error or suspend-io;
//   - on_io_error is pass_on, call-local-io-error or detach;
//   - max_buffers is 32..131072, al_extents 67..65534;
//   - an Extra key looks like DrbdOptions/<Net|Disk|Options|Resource|PeerDevice>/<name>
//     with a lower-case drbd.conf option name, does not name a typed option, is not
//     set under both Options and Resource, and its value is one drbd.conf word.
//
// Unset options are never an error. Validate returns nil when everything is valid.
func (o Options) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, cairn.InvalidField("options."+field, format, args...))
	}
	if o.Protocol != nil {
		switch *o.Protocol {
		case "A", "B", "C":
		default:
			bad("protocol", "protocol must be A, B or C, got %q", *o.Protocol)
		}
	}
	if o.Quorum != nil {
		switch q := *o.Quorum; q {
		case "off", "majority", "all":
		default:
			n, err := strconv.Atoi(q)
			if err != nil || n < 1 || n > maxQuorum {
				bad("quorum", "quorum must be off, majority, all or a number of votes 1..%d, got %q", maxQuorum, q)
			}
		}
	}
	if o.OnNoQuorum != nil {
		switch *o.OnNoQuorum {
		case "io-error", "suspend-io":
		default:
			bad("on_no_quorum", "on_no_quorum must be io-error or suspend-io, got %q", *o.OnNoQuorum)
		}
	}
	if o.OnIOError != nil {
		switch *o.OnIOError {
		case "pass_on", "call-local-io-error", "detach":
		default:
			bad("on_io_error", "on_io_error must be pass_on, call-local-io-error or detach, got %q", *o.OnIOError)
		}
	}
	if o.MaxBuffers != nil && (*o.MaxBuffers < minMaxBuffers || *o.MaxBuffers > maxMaxBuffers) {
		bad("max_buffers", "max_buffers must be %d..%d, got %d", minMaxBuffers, maxMaxBuffers, *o.MaxBuffers)
	}
	if o.ALExtents != nil && (*o.ALExtents < minALExtents || *o.ALExtents > maxALExtents) {
		bad("al_extents", "al_extents must be %d..%d, got %d", minALExtents, maxALExtents, *o.ALExtents)
	}
	for _, k := range sortedKeys(o.Extra) {
		field := "extra[" + k + "]"
		m := extraKey.FindStringSubmatch(k)
		if m == nil {
			bad(field, "extra option %q must look like DrbdOptions/<Net|Disk|Options|Resource|PeerDevice>/<option>", k)
			continue
		}
		if typed, ok := typedKeys[m[2]]; ok {
			bad(field, "extra option %q duplicates the typed option %s; set %s instead", k, typed, typed)
			continue
		}
		if m[1] == "Options" {
			if _, dup := o.Extra["DrbdOptions/Resource/"+m[2]]; dup {
				bad(field, "extra option %q is also set as DrbdOptions/Resource/%s; set one of them", k, m[2])
				continue
			}
		}
		if v := o.Extra[k]; !extraValue.MatchString(v) {
			bad(field, "extra option %q has value %q; a value must be one word of letters, digits and ._:/+@%%-", k, v)
		}
	}
	return errors.Join(errs...)
}

// extraOption is one untyped option placed in its section.
type extraOption struct {
	section, name, value string
}

// extraOptions returns the Extra options with the section they render into, sorted by
// section and name. It assumes Validate passed.
func (o Options) extraOptions() []extraOption {
	var out []extraOption
	for _, k := range sortedKeys(o.Extra) {
		m := extraKey.FindStringSubmatch(k)
		if m == nil {
			continue
		}
		out = append(out, extraOption{section: extraSections[m[1]], name: m[2], value: o.Extra[k]})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].section != out[j].section {
			return out[i].section < out[j].section
		}
		return out[i].name < out[j].name
	})
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// yesNo renders a bool the way drbd.conf spells it.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// InSection returns the "name value" pairs of one section, typed options first in
// a fixed order, then the Extra options of that section sorted by name.
func (o Options) InSection(section string) [][2]string {
	var out [][2]string
	add := func(name, value string) { out = append(out, [2]string{name, value}) }
	switch section {
	case SectionOptions:
		if o.AutoPromote != nil {
			add("auto-promote", yesNo(*o.AutoPromote))
		}
		if o.Quorum != nil {
			add("quorum", *o.Quorum)
		}
		if o.OnNoQuorum != nil {
			add("on-no-quorum", *o.OnNoQuorum)
		}
	case SectionNet:
		if o.Protocol != nil {
			add("protocol", *o.Protocol)
		}
		if o.AllowTwoPrimaries != nil {
			add("allow-two-primaries", yesNo(*o.AllowTwoPrimaries))
		}
		if o.MaxBuffers != nil {
			add("max-buffers", strconv.Itoa(*o.MaxBuffers))
		}
	case SectionDisk:
		if o.OnIOError != nil {
			add("on-io-error", *o.OnIOError)
		}
		if o.ALExtents != nil {
			add("al-extents", strconv.Itoa(*o.ALExtents))
		}
	}
	for _, e := range o.extraOptions() {
		if e.section == section {
			add(e.name, e.value)
		}
	}
	return out
}

// Ptr returns a pointer to v, for building Options literals:
// Options{AutoPromote: drbd.Ptr(false)}.
func Ptr[T any](v T) *T { return &v }

// String renders the set options compactly for logs in drbd.conf names, section by
// section (options, net, disk), e.g. "quorum=majority protocol=C ping-timeout=10".
func (o Options) String() string {
	var parts []string
	for _, s := range []string{SectionOptions, SectionNet, SectionDisk} {
		for _, kv := range o.InSection(s) {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	return strings.Join(parts, " ")
}

// Without returns o with the named options unset, so that they inherit again: typed
// options by their JSON name ("protocol", "auto_promote", …), untyped ones by their
// Extra key ("DrbdOptions/Net/ping-timeout"). Unsetting what is not set is no error; an
// unknown name is (invalid_argument naming unset[i]). o is not changed.
func (o Options) Without(names []string) (Options, error) {
	out := Resolve(o)
	for i, n := range names {
		switch n {
		case "protocol":
			out.Protocol = nil
		case "allow_two_primaries":
			out.AllowTwoPrimaries = nil
		case "max_buffers":
			out.MaxBuffers = nil
		case "auto_promote":
			out.AutoPromote = nil
		case "quorum":
			out.Quorum = nil
		case "on_no_quorum":
			out.OnNoQuorum = nil
		case "on_io_error":
			out.OnIOError = nil
		case "al_extents":
			out.ALExtents = nil
		default:
			if !strings.HasPrefix(n, "DrbdOptions/") {
				return o, cairn.InvalidField("unset["+strconv.Itoa(i)+"]",
					"%q is neither a typed option (protocol, allow_two_primaries, max_buffers, auto_promote, quorum, on_no_quorum, on_io_error, al_extents) nor a DrbdOptions/<Section>/<name> key", n)
			}
			delete(out.Extra, n)
			if len(out.Extra) == 0 {
				out.Extra = nil
			}
		}
	}
	return out, nil
}
