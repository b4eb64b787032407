package commands_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/events"
	"github.com/rs/zerolog"
)

// subjectToken is what an accepted name must be in a subject (events.Token): one token,
// no wildcard, no dot. Node names may be DNS names; their dots become tildes.
var subjectToken = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_~-]{0,252}$`)

// FuzzDecode feeds arbitrary verbs and bodies to admission's decoding. It must never
// panic; a refusal carries a stable code and a message; an accepted body decodes into
// the verb's Go type with a name that is a valid subject token (so it can never break
// out of its aggregate's subject).
func FuzzDecode(f *testing.F) {
	for _, seed := range []struct{ verb, body string }{
		{"node.add", `{"name":"n1","host":"h1","address":"10.0.0.1","failure_domain":"RACK1","role":"storage"}`},
		{"node.add", `{"name":"n1","host":"h1","address":"::1"}`},
		{"node.remove", `{"name":"n1"}`},
		{"node.set-state", `{"name":"n1","state":"offline","reason":"x"}`},
		{"cluster.create", `{"name":"c1","failure_domains":true,"data_chunks":2,"parity_chunks":1}`},
		{"node.add", `{"name":"a.b","host":"h","address":"1.2.3.4"}`},
		{"node.add", `{"name":"\u0000","host":"h","address":"1.2.3.4"}`},
		{"node.add", `{"command_id":7}`},
		{"cluster.create", `{"name":"c","failure_domains":"yes","data_chunks":2.5,"parity_chunks":1}`},
		{"x", `null`},
	} {
		f.Add(seed.verb, []byte(seed.body))
	}
	store := events.NewStore(nil, events.NewNames(""))
	adm := commands.New(store, nil, nil, zerolog.Nop(), commands.Options{})
	known := map[string]bool{}
	for _, v := range adm.Verbs() {
		known[v] = true
	}
	f.Fuzz(func(t *testing.T, verb string, body []byte) {
		req, _, err := adm.Decode(admission.Request{Verb: verb, Body: body})
		if err != nil {
			e := cairn.AsError(err)
			switch e.Code {
			case cairn.CodeInvalidArgument, cairn.CodeUnknownCommand, cairn.CodePayloadTooLarge:
			default:
				t.Fatalf("unexpected code %s: %v", e.Code, e)
			}
			if e.Message == "" {
				t.Fatal("refusal without a message")
			}
			return
		}
		if !known[verb] {
			t.Fatalf("unknown verb %q accepted", verb)
		}
		if req.CommandID == "" || req.Actor == "" {
			t.Fatalf("defaults not filled: %+v", req)
		}
		var named struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(body, &named); err != nil {
			t.Fatalf("schema-valid body does not decode: %v", err)
		}
		if tok := events.Token(named.Name); !subjectToken.MatchString(tok) || strings.Contains(named.Name, "~") {
			t.Fatalf("accepted name %q is not a safe subject token (%q)", named.Name, tok)
		}
	})
}
