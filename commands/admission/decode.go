package admission

import (
	"encoding/json"
	"fmt"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/decide"
	"github.com/cairn-io/cairn/schemas"
	"github.com/google/uuid"
)

// Decoding a command before it is decided: size, verb, command id, schema.

// Decode checks a request before any state is read: the size limit, the verb, the
// command id, the JSON Schema of the verb. It fills in the defaults (command id,
// actor, correlation and causation ids) and returns the request and its handler, or a
// *cairn.Error (payload_too_large, unknown_command or invalid_argument naming the field).
// It does no I/O.
func (a *Admission) Decode(req Request) (Request, decide.Handler, error) {
	if len(req.Body) > a.opts.MaxBody {
		return req, decide.Handler{}, cairn.Errorf(cairn.CodePayloadTooLarge,
			"command body is %d bytes, over the limit of %d", len(req.Body), a.opts.MaxBody).
			WithDetails(map[string]any{"size": len(req.Body), "limit": a.opts.MaxBody})
	}
	h, ok := a.handlers[req.Verb]
	if !ok {
		msg := fmt.Sprintf("unknown command %q", req.Verb)
		if s := a.suggest(req.Verb); s != "" {
			msg += "; did you mean " + s + "?"
		}
		return req, decide.Handler{}, cairn.Errorf(cairn.CodeUnknownCommand, "%s", msg).
			WithDetails(map[string]any{"verbs": a.Verbs()})
	}
	// The command id first, so that even a refusal of a malformed body names it.
	var idField struct {
		CommandID any `json:"command_id"`
	}
	_ = json.Unmarshal(req.Body, &idField)
	bodyID, _ := idField.CommandID.(string)
	if req.CommandID == "" {
		req.CommandID = bodyID
	}
	if req.CommandID == "" {
		req.CommandID = uuid.Must(uuid.NewV7()).String()
		req.generated = true
	}
	if !req.generated {
		// Only an id the client chose can come back with another request; a made-up
		// one needs no digest (and the hot path no canonical re-encoding).
		req.digest = RequestDigest(req.Verb, req.Body)
	}
	if len(req.CommandID) > 100 || !validCommandID(req.CommandID) {
		req.CommandID = ""
		return req, decide.Handler{}, cairn.InvalidField("command_id",
			"command_id must be 1-100 letters, digits, '.', '_', ':' or '-', starting with a letter or digit")
	}
	if err := checkUTF8(req.Body); err != nil {
		return req, decide.Handler{}, err
	}
	if err := schemas.Validate(schemas.CommandSchemaID(req.Verb), req.Body); err != nil {
		return req, decide.Handler{}, err
	}
	if bodyID != "" && bodyID != req.CommandID {
		return req, decide.Handler{}, cairn.InvalidField("command_id",
			"command_id %q differs from the Cairn-Command-Id header %q", bodyID, req.CommandID)
	}
	if req.Actor == "" {
		req.Actor = "anonymous"
	}
	if req.CorrelationID == "" {
		req.CorrelationID = req.CommandID
	}
	if req.CausationID == "" {
		req.CausationID = req.CommandID
	}
	return req, h, nil
}

// ValidCommandID reports whether id is a valid command id: the command_id definition in
// schemas/defs.json (1-100 letters, digits, '.', '_', ':' or '-', starting with a letter or
// digit), for ids that arrive in the Cairn-Command-Id header and ids policies derive.
func ValidCommandID(id string) bool { return len(id) <= 100 && validCommandID(id) }

// validCommandID checks id's characters (ValidCommandID also its length).
func validCommandID(id string) bool {
	for i, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && (r == '.' || r == '_' || r == ':' || r == '-'):
		default:
			return false
		}
	}
	return id != ""
}
