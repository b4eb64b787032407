package events

import (
	"errors"
	"fmt"
	"sync"

	json "github.com/segmentio/encoding/json"

	"github.com/cairn-io/cairn/schemas"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Upcaster turns a payload of schema version v into version v+1. It receives the
// decoded JSON object and returns the new one; it must be pure and deterministic.
type Upcaster func(map[string]any) (map[string]any, error)

// Type describes one event type: its name, its current schema version, the Go type of
// its payload at that version, and one upcaster per older version. Every version
// 1..Version has a schema events/<name>.v<version>.json.
type Type struct {
	Name    string
	Version int
	New     func() Payload
	// Upcasters[v] upcasts version v to v+1, for v in 1..Version-1.
	Upcasters map[int]Upcaster

	schemas []*jsonschema.Schema // index v-1
}

var (
	regMu    sync.RWMutex
	registry = map[string]*Type{}
)

// Register adds an event type. It panics on a duplicate name, a missing schema or a
// missing upcaster: all are programming errors found at start-up.
func Register(t Type) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[t.Name]; dup {
		panic("events: duplicate event type " + t.Name)
	}
	if t.Version < 1 || t.New == nil {
		panic("events: type " + t.Name + " needs a version and a constructor")
	}
	if got := t.New().EventType(); got != t.Name {
		panic(fmt.Sprintf("events: type %s constructs payload of type %s", t.Name, got))
	}
	for v := 1; v <= t.Version; v++ {
		s, err := schemas.Get(schemas.EventSchemaID(t.Name, v))
		if err != nil {
			panic("events: " + err.Error())
		}
		t.schemas = append(t.schemas, s)
		if v < t.Version && t.Upcasters[v] == nil {
			panic(fmt.Sprintf("events: type %s has no upcaster from v%d", t.Name, v))
		}
	}
	registry[t.Name] = &t
}

// Lookup returns the registered type with the given name.
func Lookup(name string) (*Type, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	t, ok := registry[name]
	return t, ok
}

// DecodeError says why a stored message is not a valid event.
type DecodeError struct {
	Seq    uint64
	Reason string
	// Unreadable is true for a well-formed envelope of an event type or schema version
	// this binary does not know: a newer cairn wrote it (a rolling upgrade). It is not
	// junk to skip but state this binary cannot fold.
	Unreadable bool
}

// NeedsUpgrade reports whether err is a DecodeError of an event this binary cannot read
// (Unreadable), and returns it.
func NeedsUpgrade(err error) (*DecodeError, bool) {
	var de *DecodeError
	if errors.As(err, &de) && de.Unreadable {
		return de, true
	}
	return nil, false
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("event at seq %d: %s", e.Seq, e.Reason)
}

// Decode parses, validates and upcasts the message body stored at seq. The envelope
// must carry every field; the payload must satisfy the schema of its stated version and
// is upcast to the current version before it is decoded into the Go type. It returns a
// *DecodeError for a body that is not a valid event (unknown type, version newer than
// this binary, schema violation). The event's strings and payload share body's memory
// (no copy of each field: decoding is most of a replay's own work), so body must not
// be changed afterwards; a message's data never is.
func Decode(seq uint64, body []byte) (Event, error) {
	ev := Event{Seq: seq}
	if err := unmarshalShared(body, &ev.Envelope); err != nil {
		return ev, &DecodeError{Seq: seq, Reason: "envelope is not valid JSON: " + err.Error()}
	}
	env := &ev.Envelope
	switch {
	case env.ID == "":
		return ev, &DecodeError{Seq: seq, Reason: "envelope has no id"}
	case env.Type == "":
		return ev, &DecodeError{Seq: seq, Reason: "envelope has no type"}
	case env.SchemaVersion < 1:
		return ev, &DecodeError{Seq: seq, Reason: "envelope has no schema_version"}
	case env.Subject == "":
		return ev, &DecodeError{Seq: seq, Reason: "envelope has no subject"}
	case env.OccurredAt.IsZero():
		return ev, &DecodeError{Seq: seq, Reason: "envelope has no occurred_at"}
	case env.CommandID == "" || env.Actor == "":
		return ev, &DecodeError{Seq: seq, Reason: "envelope has no command_id or actor"}
	case len(env.Payload) == 0:
		return ev, &DecodeError{Seq: seq, Reason: "envelope has no payload"}
	}
	t, ok := Lookup(env.Type)
	if !ok {
		return ev, &DecodeError{Seq: seq, Reason: fmt.Sprintf("unknown event type %q (v%d): written by a newer cairn", env.Type, env.SchemaVersion), Unreadable: true}
	}
	if env.SchemaVersion > t.Version {
		return ev, &DecodeError{Seq: seq, Reason: fmt.Sprintf("%s v%d is newer than this binary knows (v%d): written by a newer cairn", t.Name, env.SchemaVersion, t.Version), Unreadable: true}
	}
	payload, err := validPayload(t, env.SchemaVersion, env.Payload)
	if err != nil {
		return ev, &DecodeError{Seq: seq, Reason: err.Error()}
	}
	data := t.New()
	if err := unmarshalShared(payload, data); err != nil {
		return ev, &DecodeError{Seq: seq, Reason: fmt.Sprintf("%s payload: %v", t.Name, err)}
	}
	ev.Data = data
	return ev, nil
}

// validPayload validates payload against the schema of its version (once per distinct
// payload at the current version, see memo) and upcasts it to the current version.
func validPayload(t *Type, version int, payload []byte) ([]byte, error) {
	current := version == t.Version
	if current && memo.known(t.Name, version, payload) {
		return payload, nil
	}
	doc, err := decodeDocument(payload)
	if err != nil {
		return nil, fmt.Errorf("payload is not valid JSON: %v", err)
	}
	if err := schemas.ValidateValue(t.schemas[version-1], doc); err != nil {
		return nil, fmt.Errorf("%s v%d payload: %v", t.Name, version, err)
	}
	if current {
		memo.remember(t.Name, version, payload)
		return payload, nil
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("payload is not an object")
	}
	for v := version; v < t.Version; v++ {
		if obj, err = t.Upcasters[v](obj); err != nil {
			return nil, fmt.Errorf("upcast %s v%d: %v", t.Name, v, err)
		}
	}
	if payload, err = json.Marshal(obj); err != nil {
		return nil, fmt.Errorf("re-encode upcast payload: %v", err)
	}
	if err := schemas.Validate(schemas.EventSchemaID(t.Name, t.Version), payload); err != nil {
		return nil, fmt.Errorf("upcast %s payload: %v", t.Name, err)
	}
	return payload, nil
}

// unmarshalShared is json.Unmarshal with the decoded strings and raw messages sharing
// b's memory instead of copies of it.
func unmarshalShared(b []byte, v any) error {
	rest, err := json.Parse(b, v, json.ZeroCopy)
	if len(rest) != 0 {
		if _, syntax := err.(*json.SyntaxError); !syntax {
			err = fmt.Errorf("invalid character %q after top-level value", rest[0])
		}
	}
	return err
}

// DecodeStored decodes a stored message as Decode does and also refuses an envelope
// that names another subject than the one it was stored on (which would let a message
// published around admission move another aggregate's boundary).
func DecodeStored(r Raw) (Event, error) {
	ev, err := Decode(r.Seq, r.Data)
	if err == nil && ev.Subject != r.Subject {
		err = &DecodeError{Seq: r.Seq, Reason: fmt.Sprintf("envelope names subject %s but was stored on %s", ev.Subject, r.Subject)}
	}
	return ev, err
}

// Encode returns the wire form of an envelope.
func Encode(env Envelope) ([]byte, error) { return json.Marshal(env) }

// decodeDocument decodes JSON into the generic form the schema validator takes, with
// the faster decoder of the projection's hot path. Numbers become float64, which the
// validator accepts; no event field needs integers beyond 2^53.
func decodeDocument(raw []byte) (any, error) {
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	return doc, nil
}
