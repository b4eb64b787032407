// Package gateway is the operators' HTTP API: reads of every view, commands as POST,
// the audit log, metrics and health under /cairn/v1/, and LINSTOR's REST API v1 under
// /v1/ (package linstor). Commands travel over NATS to admission like any
// other client's, so the gateway holds no rules of its own.
package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/nats-io/nats.go"
)

// Commands over HTTP: POST /cairn/v1/commands/{verb}, sent to admission over NATS.

func (g *Gateway) postCommand(w http.ResponseWriter, r *http.Request) {
	verb := r.PathValue("verb")
	const limit = 1 << 20
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		writeError(w, cairn.Errorf(cairn.CodePayloadTooLarge, "request body over %d bytes", limit))
		return
	}
	hdr := nats.Header{}
	for _, h := range []string{admission.HeaderCommandID, admission.HeaderCorrelationID, admission.HeaderCausationID} {
		if v := r.Header.Get(h); v != "" {
			hdr.Set(h, v)
		}
	}
	actor := r.Header.Get(admission.HeaderActor)
	if actor == "" {
		actor = "http:" + r.RemoteAddr
	}
	reply, err := g.Send(r.Context(), verb, body, actorOf(r, actor), hdr)
	writeReply(w, reply, err)
}

// writeReply answers a command's reply: 200 when accepted, the refusal's status
// otherwise, or the error that kept it from admission.
func writeReply(w http.ResponseWriter, reply admission.Reply, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if !reply.OK {
		status = HTTPStatus(reply.Error.Code)
	}
	writeJSON(w, status, reply)
}

// actorOf is the actor of a request's commands: its token's name ("token:<name>", which
// no header can change) when it was authenticated, otherwise fallback.
func actorOf(r *http.Request, fallback string) string {
	if p, ok := PrincipalOf(r); ok {
		return "token:" + p.Name
	}
	return fallback
}

// Send sends one command to admission over NATS, as actor, with extra headers (command,
// correlation and causation ids; nil for none), and returns admission's reply. Errors are
// *cairn.Error: payload_too_large for a body the NATS server cannot carry, unavailable
// when admission does not answer within CommandTimeout, internal for an unreadable reply.
func (g *Gateway) Send(ctx context.Context, verb string, body []byte, actor string, hdr nats.Header) (admission.Reply, error) {
	// Checked here, before the publish: a body over the NATS server's max payload (1 MiB
	// by default, less on some clusters) would fail the publish and read as unavailable.
	if maxp := g.NC.MaxPayload(); maxp > 0 && int64(len(body)) > maxp-4096 {
		return admission.Reply{}, cairn.Errorf(cairn.CodePayloadTooLarge, "request body of %d bytes is over what the NATS server carries (%d bytes, less headers)", len(body), maxp)
	}
	m := nats.NewMsg(g.Store.Names().Command(verb))
	m.Data = body
	for k, v := range hdr {
		m.Header[k] = v
	}
	m.Header.Set(admission.HeaderActor, actor)
	timeout := g.CommandTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := g.NC.RequestMsgWithContext(ctx, m)
	if err != nil {
		return admission.Reply{}, cairn.Errorf(cairn.CodeUnavailable, "admission did not answer %s: %v", verb, err)
	}
	var reply admission.Reply
	if err := json.Unmarshal(resp.Data, &reply); err != nil {
		return admission.Reply{}, cairn.Errorf(cairn.CodeInternal, "unreadable reply from admission")
	}
	return reply, nil
}
