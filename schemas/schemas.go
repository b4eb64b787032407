// Package schemas embeds the JSON Schemas (draft 2020-12) of every command and event
// and validates documents against them. Schemas are the contract at every edge:
// admission validates command bodies, the event codec validates payloads on decode.
//
// Layout: commands/<verb>.json, events/<type>.v<version>.json, defs.json (shared
// definitions), envelope.json (the event envelope).
package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/cairn-io/cairn"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var printer = message.NewPrinter(language.English)

//go:embed defs.json envelope.json commands/*.json events/*.json
var files embed.FS

const baseURL = "https://cairn.io/schemas/"

var (
	once     sync.Once
	compiled map[string]*jsonschema.Schema
	loadErr  error
)

func load() {
	compiled = map[string]*jsonschema.Schema{}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	var names []string
	defs, err := readDefs()
	if err != nil {
		loadErr = err
		return
	}
	loadErr = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return fmt.Errorf("schema %s: %w", p, err)
		}
		if doc, err = inlineDefs(doc, defs); err != nil {
			return fmt.Errorf("schema %s: %w", p, err)
		}
		if err := c.AddResource(baseURL+p, doc); err != nil {
			return fmt.Errorf("schema %s: %w", p, err)
		}
		names = append(names, p)
		return nil
	})
	if loadErr != nil {
		return
	}
	for _, p := range names {
		s, err := c.Compile(baseURL + p)
		if err != nil {
			loadErr = fmt.Errorf("compile schema %s: %w", p, err)
			return
		}
		compiled[strings.TrimSuffix(p, ".json")] = s
	}
}

func readDefs() (map[string]any, error) {
	raw, err := files.ReadFile("defs.json")
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("defs.json: %w", err)
	}
	defs, _ := doc.(map[string]any)["$defs"].(map[string]any)
	return defs, nil
}

// inlineDefs replaces every {"$ref": "…defs.json#/$defs/NAME", …} with the definition
// itself (sibling keywords kept). The schemas mean the same; validation skips the
// reference resolution, which was half its cost on the projection's hot path.
func inlineDefs(v any, defs map[string]any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			nv, err := inlineDefs(val, defs)
			if err != nil {
				return nil, err
			}
			out[k] = nv
		}
		ref, ok := out["$ref"].(string)
		if !ok {
			return out, nil
		}
		_, name, found := strings.Cut(ref, "defs.json#/$defs/")
		if !found {
			return out, nil
		}
		def, ok := defs[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %s: no such definition", ref)
		}
		delete(out, "$ref")
		for k, val := range def {
			if _, own := out[k]; !own {
				out[k] = val
			}
		}
		return inlineDefs(out, defs) // definitions may refer to definitions
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			nv, err := inlineDefs(val, defs)
			if err != nil {
				return nil, err
			}
			out[i] = nv
		}
		return out, nil
	}
	return v, nil
}

// Get returns the compiled schema with the given id, the file path without ".json"
// (e.g. "commands/node.add", "events/node.added.v2"). It returns an error if no such
// schema is embedded; a broken embedded schema is reported by every call.
func Get(id string) (*jsonschema.Schema, error) {
	once.Do(load)
	if loadErr != nil {
		return nil, loadErr
	}
	s, ok := compiled[id]
	if !ok {
		return nil, fmt.Errorf("no schema %q", id)
	}
	return s, nil
}

// CommandSchemaID is the schema id of a command verb.
func CommandSchemaID(verb string) string { return "commands/" + verb }

// EventSchemaID is the schema id of an event type at a schema version.
func EventSchemaID(typ string, version int) string {
	return fmt.Sprintf("events/%s.v%d", typ, version)
}

// Validate parses raw as JSON and validates it against the schema id. It returns an
// invalid_argument *cairn.Error naming the first offending field (dotted path, "" for
// the document itself) when raw is not JSON or does not satisfy the schema, and an
// internal error when the schema does not exist.
func Validate(id string, raw []byte) error {
	s, err := Get(id)
	if err != nil {
		return cairn.Errorf(cairn.CodeInternal, "%v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return cairn.InvalidField("", "body is not a valid JSON document: %v", err)
	}
	return ValidateValue(s, doc)
}

// ValidateValue validates an already-decoded document (as produced by
// jsonschema.UnmarshalJSON) against s; errors as for Validate.
func ValidateValue(s *jsonschema.Schema, doc any) error {
	err := s.Validate(doc)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return cairn.InvalidField("", "%v", err)
	}
	// Every independent error, each named by its most specific cause: the first is the
	// error's field and message, all of them are in details "errors".
	causes := ve.Causes
	if len(causes) == 0 {
		causes = []*jsonschema.ValidationError{ve}
	}
	var all []*cairn.Error
	for _, c := range causes {
		all = append(all, fieldError(leaf(c)))
	}
	// The validator finds them in no fixed order: by field, so the same body always
	// names the same first field.
	sort.SliceStable(all, func(i, j int) bool { return all[i].Field < all[j].Field })
	first := all[0]
	if len(all) > 1 {
		list := make([]map[string]string, 0, len(all))
		var more []string
		for i, e := range all {
			list = append(list, map[string]string{"field": e.Field, "message": e.Message})
			if i > 0 && i <= 5 {
				more = append(more, e.Message)
			}
		}
		first.Message += "; also: " + strings.Join(more, "; ")
		first.Details = map[string]any{"errors": list}
	}
	return first
}

// leaf descends to the first most specific cause, which names the field best; it stops
// at an anyOf of formats (an address: IPv4 or IPv6), which it names as a whole.
func leaf(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(ve.Causes) > 0 {
		if _, any := ve.ErrorKind.(*kind.AnyOf); any && allFormats(ve.Causes) {
			return ve
		}
		ve = ve.Causes[0]
	}
	return ve
}

func allFormats(causes []*jsonschema.ValidationError) bool {
	for _, c := range causes {
		if _, ok := c.ErrorKind.(*kind.Format); !ok {
			return false
		}
	}
	return true
}

func fieldError(ve *jsonschema.ValidationError) *cairn.Error {
	loc := append([]string(nil), ve.InstanceLocation...)
	msg := ve.ErrorKind.LocalizedString(printer)
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		loc = append(loc, k.Missing[0])
		msg = "is required"
	case *kind.AdditionalProperties:
		loc = append(loc, k.Properties[0])
		msg = "is not a known field"
	case *kind.Type:
		msg = fmt.Sprintf("must be %s, not %s", strings.Join(k.Want, " or "), k.Got)
	case *kind.MinLength:
		if k.Got == 0 {
			msg = "must not be empty"
		} else {
			msg = fmt.Sprintf("must be at least %d characters", k.Want)
		}
	case *kind.MaxLength:
		msg = fmt.Sprintf("must be at most %d characters, got %d", k.Want, k.Got)
	case *kind.Pattern:
		msg = fmt.Sprintf("must match %s", k.Want)
	case *kind.AnyOf:
		var formats []string
		var got any
		for _, c := range ve.Causes {
			f := c.ErrorKind.(*kind.Format)
			formats, got = append(formats, f.Want), f.Got
		}
		msg = fmt.Sprintf("%v is not an %s address", got, strings.Join(formats, " or "))
		if len(formats) == 2 && formats[0] == "ipv4" {
			msg += " (a host name is not taken: DRBD connects to addresses)"
		}
	}
	field := strings.Join(loc, ".")
	if field == "" {
		return cairn.InvalidField("", "body %s", msg)
	}
	return cairn.InvalidField(field, "%s %s", field, msg)
}

// Field is one field of a command body as its schema says it (CommandFields).
type Field struct {
	Name     string
	Required bool
	// Type is the JSON type, or the shared definition it refers to (defs.json), or
	// the values it takes.
	Type string
	// Description is the schema's description of the field ("" for none).
	Description string
	// Either lists the fields of which at least one is required, this one among them
	// (nil when the field is in no such group).
	Either []string
}

// alternatives is a schema's anyOf of single required fields: at least one of them.
type alternatives []struct {
	Required []string `json:"required"`
}

// fields returns the names when every alternative requires exactly one field.
func (a alternatives) fields() []string {
	var out []string
	for _, alt := range a {
		if len(alt.Required) != 1 {
			return nil
		}
		out = append(out, alt.Required[0])
	}
	return out
}

// CommandFields returns a verb's schema title and its body's fields, required ones
// first, then by name (command_id, which every verb takes, left out). Refuses an
// unknown verb (not_found).
func CommandFields(verb string) (title string, fields []Field, err error) {
	raw, err := files.ReadFile("commands/" + verb + ".json")
	if err != nil {
		return "", nil, cairn.Errorf(cairn.CodeNotFound, "no command %q (cairn cmd --help lists them)", verb)
	}
	var doc struct {
		Title      string                    `json:"title"`
		Required   []string                  `json:"required"`
		Properties map[string]map[string]any `json:"properties"`
		AnyOf      alternatives              `json:"anyOf"`
		AllOf      []struct {
			AnyOf alternatives `json:"anyOf"`
		} `json:"allOf"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return "", nil, err
	}
	either := map[string][]string{}
	groups := []alternatives{doc.AnyOf}
	for _, a := range doc.AllOf {
		groups = append(groups, a.AnyOf)
	}
	for _, g := range groups {
		for _, name := range g.fields() {
			either[name] = g.fields()
		}
	}
	for name, p := range doc.Properties {
		if name == "command_id" {
			continue
		}
		desc, _ := p["description"].(string)
		f := Field{Name: name, Required: slices.Contains(doc.Required, name), Description: desc, Either: either[name]}
		switch {
		case p["$ref"] != nil:
			ref, _ := p["$ref"].(string)
			f.Type = ref[strings.LastIndex(ref, "/")+1:]
		case p["enum"] != nil:
			f.Type = fmt.Sprint(p["enum"])
		default:
			f.Type = fmt.Sprint(p["type"])
		}
		fields = append(fields, f)
	}
	slices.SortFunc(fields, func(a, b Field) int {
		if a.Required != b.Required {
			if a.Required {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return doc.Title, fields, nil
}

// Verbs are every command verb with a schema, sorted.
func Verbs() []string {
	entries, _ := fs.ReadDir(files, "commands")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	return out
}
