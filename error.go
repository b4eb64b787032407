// Package cairn holds the domain types shared by every layer of the control plane:
// the error type with its stable codes, and nothing that talks to NATS or Pebble.
package cairn

import (
	"errors"
	"fmt"
)

// Stable error codes. They are part of the public contract: clients match on them,
// so a code is never renamed or reused for another meaning.
const (
	CodeInvalidArgument     = "invalid_argument"     // the command is malformed; Field names the offending field
	CodeNotFound            = "not_found"            // the command names something that does not exist
	CodeAlreadyExists       = "already_exists"       // the command would create something that exists
	CodeConflict            = "conflict"             // concurrent change won; retrying may succeed
	CodePreconditionFailed  = "precondition_failed"  // the state does not allow the command
	CodeDomainUnbalanced    = "domain_unbalanced"    // the failure-domain layout forbids the command
	CodeUnknownCommand      = "unknown_command"      // no handler for the verb
	CodePayloadTooLarge     = "payload_too_large"    // the request body is over the size limit
	CodeUnauthorized        = "unauthorized"         // the caller may not send this command
	CodeUnavailable         = "unavailable"          // a dependency (JetStream, the views) is not ready
	CodeInternal            = "internal"             // a bug or an unexpected failure; the message is safe to show
	CodeIdempotencyMismatch = "idempotency_mismatch" // the command id was used for another request (verb or body)
	CodeUnauthenticated     = "unauthenticated"      // the HTTP request carries no valid token
	CodeRateLimited         = "rate_limited"         // too many failed sign-ins from this address; wait
)

// Error is the one error type that crosses the command boundary. Code is one of the
// stable codes above, Message says in the operator's terms what was refused and why,
// Field names the offending request field (dotted path) for invalid_argument, and
// Details carries the numbers behind a refusal.
type Error struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Field   string         `json:"field,omitempty"`
	Details map[string]any `json:"details,omitempty"`
	// Object names the kind of thing a not_found or already_exists is about (one of the
	// Obj constants; empty when the code is not about one object). The LINSTOR API maps
	// it to its FAIL_NOT_FOUND_* and FAIL_EXISTS_* codes.
	Object string `json:"object,omitempty"`
}

// Kinds of object an Error can be about.
const (
	ObjNode               = "node"
	ObjStoragePool        = "storage_pool"
	ObjResourceGroup      = "resource_group"
	ObjResourceDefinition = "resource_definition"
	ObjVolumeDefinition   = "volume_definition"
	ObjResource           = "resource" // a replica: a definition on a node
	ObjPool               = "pool"
	ObjLvol               = "lvol"
	ObjSnapshot           = "snapshot"
	ObjRemote             = "remote"
	ObjBackup             = "backup"
	ObjSchedule           = "schedule"
	ObjExternalFile       = "external_file"
)

// About returns e naming the kind of object it is about (it mutates and returns e for
// chaining).
func (e *Error) About(object string) *Error {
	e.Object = object
	return e
}

// Error implements error.
func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (field %s)", e.Code, e.Message, e.Field)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// InvalidField returns an invalid_argument error naming field.
func InvalidField(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

// WithDetails returns e with details attached (it mutates and returns e for chaining).
func (e *Error) WithDetails(kv map[string]any) *Error {
	e.Details = kv
	return e
}

// ErrorCode returns the code of err if it is (or wraps) an *Error, "" for nil and
// CodeInternal for any other error.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// AsError converts any error into an *Error. Errors that are not already *Error become
// internal errors whose message is err's text.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// FieldError returns the invalid_argument *Error naming field among err and every error
// it wraps or joins (errors.Join of several field errors, as validations that report
// every problem return), or nil when none does.
func FieldError(err error, field string) *Error {
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) && ce.Code == CodeInvalidArgument && ce.Field == field {
		return ce
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if fe := FieldError(e, field); fe != nil {
				return fe
			}
		}
	}
	return nil
}
