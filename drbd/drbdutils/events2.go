package drbdutils

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The verbs of `drbdsetup events2` lines.
const (
	VerbExists   = "exists"   // part of the initial dump of the current state
	VerbCreate   = "create"   // an object appeared
	VerbChange   = "change"   // some of an object's fields changed
	VerbDestroy  = "destroy"  // an object is gone
	VerbCall     = "call"     // a helper (handler script) is called
	VerbResponse = "response" // a helper returned (status:N)
)

// The objects of `drbdsetup events2` lines. ObjectNone only appears in `exists -`, the
// line that ends the initial dump.
const (
	ObjectResource   = "resource"
	ObjectConnection = "connection"
	ObjectDevice     = "device"
	ObjectPeerDevice = "peer-device"
	ObjectPath       = "path"
	ObjectHelper     = "helper"
	ObjectNone       = "-"
)

// Event is one line of `drbdsetup events2 [--timestamps] [--diff] [--statistics]`.
type Event struct {
	// Time is the --timestamps prefix; zero when the line has none.
	Time time.Time
	// Verb and Object: see the Verb… and Object… constants. Object is kept as
	// printed, so objects of newer DRBD versions parse too.
	Verb   string
	Object string
	// Fields are the key:value pairs in the order printed; unknown keys included.
	Fields []Field
}

// Field is one key:value pair of an events2 line. The value is everything after the
// first colon (`local:ipv4:1.2.3.4:7789` has key local and value ipv4:1.2.3.4:7789).
// In --diff output a changed field prints as `key:old->new`: then Old holds old, Value
// new, and Diff is set.
type Field struct {
	Key   string
	Value string
	Old   string
	Diff  bool
}

// String renders the field as events2 prints it.
func (f Field) String() string {
	if f.Diff {
		return f.Key + ":" + f.Old + "->" + f.Value
	}
	return f.Key + ":" + f.Value
}

// ParseEvents2Line parses one events2 line (without or with its trailing newline).
// An optional first word in RFC 3339 form is the --timestamps time. Then come the verb
// (exists, create, change, destroy, call, response), the object (any lower-case word,
// or "-") and the key:value fields, separated by single or repeated blanks. Errors name
// the rule the line breaks: empty line, unknown verb, missing or malformed object, a
// field without a colon or with an empty key, `-` with fields, or a word after the
// timestamp missing.
func ParseEvents2Line(line string) (Event, error) {
	words := strings.Fields(line)
	var ev Event
	if len(words) == 0 {
		return ev, fmt.Errorf("events2: empty line")
	}
	if c := words[0][0]; c >= '0' && c <= '9' {
		ts, err := time.Parse(time.RFC3339Nano, words[0])
		if err != nil {
			return Event{}, fmt.Errorf("events2: line starts with %q, neither a verb nor an RFC 3339 timestamp", clip(words[0], 40))
		}
		ev.Time = ts
		words = words[1:]
		if len(words) == 0 {
			return Event{}, fmt.Errorf("events2: timestamp without an event")
		}
	}
	switch words[0] {
	case VerbExists, VerbCreate, VerbChange, VerbDestroy, VerbCall, VerbResponse:
		ev.Verb = words[0]
	default:
		return Event{}, fmt.Errorf("events2: unknown verb %q (want exists, create, change, destroy, call or response)", clip(words[0], 40))
	}
	if len(words) < 2 {
		return Event{}, fmt.Errorf("events2: %s without an object", ev.Verb)
	}
	if !isObjectWord(words[1]) {
		return Event{}, fmt.Errorf("events2: object %q must be a lower-case word or -", clip(words[1], 40))
	}
	ev.Object = words[1]
	if ev.Object == ObjectNone && len(words) > 2 {
		return Event{}, fmt.Errorf("events2: %s - with fields", ev.Verb)
	}
	for _, w := range words[2:] {
		key, value, ok := strings.Cut(w, ":")
		if !ok || key == "" {
			return Event{}, fmt.Errorf("events2: field %q is not key:value", clip(w, 60))
		}
		f := Field{Key: key, Value: value}
		if old, nv, diff := strings.Cut(value, "->"); diff {
			f.Old, f.Value, f.Diff = old, nv, true
		}
		ev.Fields = append(ev.Fields, f)
	}
	return ev, nil
}

func isObjectWord(s string) bool {
	if s == ObjectNone {
		return true
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c == '-' || c >= '0' && c <= '9' && i > 0) {
			return false
		}
	}
	return s[0] != '-'
}

// String renders the event as events2 prints it, with single blanks and the timestamp
// as drbdsetup --timestamps writes it (microseconds, numeric zone offset). For every line
// events2 prints, ParseEvents2Line(line).String() == line; for every line
// ParseEvents2Line accepts, parsing String() again gives the same Event.
func (e Event) String() string {
	var b strings.Builder
	if !e.Time.IsZero() {
		layout := "2006-01-02T15:04:05.000000-07:00"
		if e.Time.Nanosecond()%1000 != 0 {
			layout = "2006-01-02T15:04:05.000000000-07:00"
		}
		b.WriteString(e.Time.Format(layout))
		b.WriteByte(' ')
	}
	b.WriteString(e.Verb)
	b.WriteByte(' ')
	b.WriteString(e.Object)
	for _, f := range e.Fields {
		b.WriteByte(' ')
		b.WriteString(f.String())
	}
	return b.String()
}

// EndOfInitialDump reports whether e is `exists -`: every object that existed when
// events2 started has been listed; what follows are changes.
func (e Event) EndOfInitialDump() bool { return e.Verb == VerbExists && e.Object == ObjectNone }

// Field returns the field named key (the first one, should a key repeat).
func (e Event) Field(key string) (Field, bool) {
	for _, f := range e.Fields {
		if f.Key == key {
			return f, true
		}
	}
	return Field{}, false
}

// Get returns the (new) value of field key and whether the line has it.
func (e Event) Get(key string) (string, bool) {
	f, ok := e.Field(key)
	return f.Value, ok
}

// Changed reports whether field key changed on this line: in --diff output, old and new
// differ; without --diff every field a change line carries may have changed, so a
// present field counts as changed.
func (e Event) Changed(key string) bool {
	f, ok := e.Field(key)
	return ok && (!f.Diff || f.Old != f.Value)
}

// getInt returns field key as an int; ok is false when it is absent or no integer.
func (e Event) getInt(key string) (int, bool) {
	v, ok := e.Get(key)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// getUint64 returns field key as an unsigned decimal; it returns 0, false when the
// field is absent, no decimal number, negative or beyond 64 bits.
func (e Event) getUint64(key string) (uint64, bool) {
	v, ok := e.Get(key)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// getBool returns a yes/no field; ok is false when it is absent or neither.
func (e Event) getBool(key string) (bool, bool) {
	switch v, _ := e.Get(key); v {
	case "yes":
		return true, true
	case "no":
		return false, true
	}
	return false, false
}

// Name is the resource name (every object but `-` carries it).
func (e Event) Name() string { v, _ := e.Get("name"); return v }

// PeerNodeID is the peer's node id (connection, peer-device, path, some helpers).
func (e Event) PeerNodeID() (int, bool) { return e.getInt("peer-node-id") }

// ConnName is the connection's name: the peer's host name (connection, peer-device,
// path).
func (e Event) ConnName() string { v, _ := e.Get("conn-name"); return v }

// Volume is the volume number (device, peer-device, some helpers).
func (e Event) Volume() (int, bool) { return e.getInt("volume") }

// Minor is the device minor (device).
func (e Event) Minor() (int, bool) { return e.getInt("minor") }

// Role is Primary, Secondary or Unknown: this node's (resource) or the peer's
// (connection).
func (e Event) Role() string { v, _ := e.Get("role"); return v }

// Disk is the local disk state (device): Diskless, Attaching, Detaching, Failed,
// Negotiating, Inconsistent, Outdated, DUnknown, Consistent, UpToDate.
func (e Event) Disk() string { v, _ := e.Get("disk"); return v }

// PeerDisk is the peer's disk state as this node sees it (peer-device).
func (e Event) PeerDisk() string { v, _ := e.Get("peer-disk"); return v }

// Connection is the connection state (connection): StandAlone, Connecting, Connected, …
func (e Event) Connection() string { v, _ := e.Get("connection"); return v }

// Replication is the replication state (peer-device): Off, Established, SyncSource,
// SyncTarget, PausedSyncS, …
func (e Event) Replication() string { v, _ := e.Get("replication"); return v }

// Done is the resync progress in percent (peer-device, while syncing: done:37.50).
func (e Event) Done() (float64, bool) {
	v, ok := e.Get("done")
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	return f, err == nil
}

// SizeKiB is the device's size in KiB (device, with --statistics: size:4096); ok is
// false when the line has no size or it is not an unsigned decimal.
func (e Event) SizeKiB() (uint64, bool) { return e.getUint64("size") }

// OutOfSyncKiB is what is still to copy to or from the peer in KiB (peer-device, with
// --statistics: out-of-sync:2500); ok is false when the line has none or it is not an
// unsigned decimal.
func (e Event) OutOfSyncKiB() (uint64, bool) { return e.getUint64("out-of-sync") }

// Quorum reports the device's quorum (device: quorum:yes|no).
func (e Event) Quorum() (bool, bool) { return e.getBool("quorum") }

// Open reports whether the device is opened (device: open:yes|no).
func (e Event) Open() (bool, bool) { return e.getBool("open") }

// MayPromote reports whether the resource could be promoted now (resource:
// may_promote:yes|no).
func (e Event) MayPromote() (bool, bool) { return e.getBool("may_promote") }

// PromotionScore is DRBD's promotion score of the resource (0 when it may not promote;
// higher is a better Primary: its own up-to-date disk, its peers).
func (e Event) PromotionScore() (int, bool) { return e.getInt("promotion_score") }

// PeerClient reports whether the peer is a diskless client (peer-device:
// peer-client:yes|no).
func (e Event) PeerClient() (bool, bool) { return e.getBool("peer-client") }

// Client reports whether this node's device is a diskless client (device:
// client:yes|no).
func (e Event) Client() (bool, bool) { return e.getBool("client") }
