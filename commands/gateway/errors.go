// Package gateway is the operators' HTTP API: reads of every view, commands as POST,
// the audit log, metrics and health under /cairn/v1/, and LINSTOR's REST API v1 under
// /v1/ (package linstor). Commands travel over NATS to admission like any
// other client's, so the gateway holds no rules of its own.
package gateway

import (
	"encoding/json"
	"net/http"

	"github.com/cairn-io/cairn"
)

// Replies: Cairn's error codes as HTTP statuses, JSON bodies.

// HTTPStatus maps an error code to its HTTP status; this is the only place that does.
func HTTPStatus(code string) int {
	switch code {
	case cairn.CodeInvalidArgument:
		return http.StatusBadRequest
	case cairn.CodeNotFound, cairn.CodeUnknownCommand:
		return http.StatusNotFound
	case cairn.CodeAlreadyExists, cairn.CodeConflict, cairn.CodeIdempotencyMismatch:
		return http.StatusConflict
	case cairn.CodePreconditionFailed, cairn.CodeDomainUnbalanced:
		return http.StatusUnprocessableEntity
	case cairn.CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case cairn.CodeUnauthorized:
		return http.StatusForbidden
	case cairn.CodeUnauthenticated:
		return http.StatusUnauthorized
	case cairn.CodeRateLimited:
		return http.StatusTooManyRequests
	case cairn.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, err error) {
	e := cairn.AsError(err)
	writeJSON(w, HTTPStatus(e.Code), map[string]any{"ok": false, "error": e})
}

// writeJSON answers v as JSON: indented for a person (wantsPretty), compact otherwise.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	if isPretty(w) {
		enc.SetIndent("", "  ")
	}
	_ = enc.Encode(v)
}
