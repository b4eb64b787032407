// Package linstor serves LINSTOR's REST API v1 (the paths, methods, JSON shapes and
// status codes of LINSTOR's OpenAPI document, version 1.28.0) on Cairn's model, so that
// the linstor CLI, golinstor, linstor-csi and the other LINSTOR integrations drive Cairn
// unchanged. Every write becomes one or more Cairn commands sent to admission (validated,
// atomic, idempotent and in the audit with its actor); every read comes from the views.
// What Cairn cannot serve answers 501 with an ApiCallRc, never 404 (golinstor reads 404
// as "not found"). The translation lives here and nowhere else: the native API
// (/cairn/v1/) knows nothing of it.
package linstor

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/storage/backup"
	"github.com/nats-io/nats.go"
)

// RESTAPIVersion is the LINSTOR REST API version served (the client enables features by it).
const RESTAPIVersion = "1.28.0"

// Sender sends one command to admission and returns its reply (gateway.Gateway.Send).
type Sender func(ctx context.Context, verb string, body []byte, actor string, hdr nats.Header) (admission.Reply, error)

// API is LINSTOR's REST API v1 over Cairn.
type API struct {
	Send Sender
	DB   *projections.DB
	// Version is Cairn's version, shown as the controller version.
	Version string
	// Actor names the caller of a request in the commands it sends (e.g. the token's
	// name); nil: "linstor:<remote address>".
	Actor func(r *http.Request) string
	// Refusals lists the commands this serve refused lately, for the error reports (nil:
	// none).
	Refusals func() []admission.Refusal
	// Remotes opens a remote's object store (nil: no backup routes).
	Remotes func(name string) (backup.Store, error)
	// Status reads the agents' last reports (their unused block devices, heartbeats);
	// nil: no physical storage routes, and no external file is allowed anywhere.
	Status StatusOf
}

// Register adds LINSTOR's routes under /v1/ to mux. Every other /v1/ path and method
// answers 501 with an ApiCallRc.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/controller/version", a.version)
	mux.HandleFunc("GET /v1/controller/properties", a.controllerProperties)
	mux.HandleFunc("POST /v1/controller/properties", a.modifyControllerProperties)
	mux.HandleFunc("GET /v1/key-value-store", a.listKV)
	mux.HandleFunc("GET /v1/key-value-store/{instance}", a.getKV)
	mux.HandleFunc("PUT /v1/key-value-store/{instance}", a.modifyKV)
	mux.HandleFunc("DELETE /v1/key-value-store/{instance}", a.deleteKV)

	mux.HandleFunc("GET /v1/nodes", a.listNodes)
	mux.HandleFunc("POST /v1/nodes", a.createNode)
	mux.HandleFunc("GET /v1/nodes/{node}", a.getNode)
	mux.HandleFunc("PUT /v1/nodes/{node}", a.modifyNode)
	mux.HandleFunc("DELETE /v1/nodes/{node}", a.deleteNode)
	mux.HandleFunc("DELETE /v1/nodes/{node}/lost", a.lostNode)
	mux.HandleFunc("PUT /v1/nodes/{node}/evacuate", a.evacuateNode)
	mux.HandleFunc("PUT /v1/nodes/{node}/restore", a.restoreNode)
	mux.HandleFunc("GET /v1/nodes/{node}/net-interfaces", a.listNetInterfaces)
	mux.HandleFunc("GET /v1/nodes/{node}/net-interfaces/{netif}", a.getNetInterface)
	mux.HandleFunc("POST /v1/nodes/{node}/net-interfaces", a.createNetInterface)
	mux.HandleFunc("PUT /v1/nodes/{node}/net-interfaces/{netif}", a.modifyNetInterface)
	mux.HandleFunc("DELETE /v1/nodes/{node}/net-interfaces/{netif}", a.deleteNetInterface)

	mux.HandleFunc("GET /v1/view/storage-pools", a.viewStoragePools)
	mux.HandleFunc("GET /v1/nodes/{node}/storage-pools", a.nodeStoragePools)
	mux.HandleFunc("GET /v1/nodes/{node}/storage-pools/{pool}", a.getStoragePool)
	mux.HandleFunc("POST /v1/nodes/{node}/storage-pools", a.createStoragePool)
	mux.HandleFunc("PUT /v1/nodes/{node}/storage-pools/{pool}", a.modifyStoragePool)
	mux.HandleFunc("DELETE /v1/nodes/{node}/storage-pools/{pool}", a.deleteStoragePool)

	mux.HandleFunc("GET /v1/resource-groups", a.listResourceGroups)
	mux.HandleFunc("POST /v1/resource-groups", a.createResourceGroup)
	mux.HandleFunc("GET /v1/resource-groups/{rg}", a.getResourceGroup)
	mux.HandleFunc("PUT /v1/resource-groups/{rg}", a.modifyResourceGroup)
	mux.HandleFunc("DELETE /v1/resource-groups/{rg}", a.deleteResourceGroup)
	mux.HandleFunc("POST /v1/resource-groups/{rg}/spawn", a.spawn)
	mux.HandleFunc("POST /v1/resource-groups/{rg}/query-size-info", a.querySizeInfo)
	mux.HandleFunc("POST /v1/queries/resource-groups/query-all-size-info", a.queryAllSizeInfo)
	mux.HandleFunc("GET /v1/resource-groups/{rg}/volume-groups", a.listVolumeGroups)

	mux.HandleFunc("GET /v1/resource-definitions", a.listDefinitions)
	mux.HandleFunc("POST /v1/resource-definitions", a.createDefinition)
	mux.HandleFunc("GET /v1/resource-definitions/{rd}", a.getDefinition)
	mux.HandleFunc("PUT /v1/resource-definitions/{rd}", a.modifyDefinition)
	mux.HandleFunc("DELETE /v1/resource-definitions/{rd}", a.deleteDefinition)

	mux.HandleFunc("GET /v1/resource-definitions/{rd}/volume-definitions", a.listVolumeDefinitions)
	mux.HandleFunc("POST /v1/resource-definitions/{rd}/volume-definitions", a.createVolumeDefinition)
	mux.HandleFunc("GET /v1/resource-definitions/{rd}/volume-definitions/{nr}", a.getVolumeDefinition)
	mux.HandleFunc("PUT /v1/resource-definitions/{rd}/volume-definitions/{nr}", a.modifyVolumeDefinition)
	mux.HandleFunc("DELETE /v1/resource-definitions/{rd}/volume-definitions/{nr}", a.deleteVolumeDefinition)

	mux.HandleFunc("GET /v1/view/resources", a.viewResources)
	mux.HandleFunc("GET /v1/resource-definitions/{rd}/resources", a.listResources)
	mux.HandleFunc("POST /v1/resource-definitions/{rd}/resources", a.createResources)
	mux.HandleFunc("GET /v1/resource-definitions/{rd}/resources/{node}", a.getResource)
	mux.HandleFunc("POST /v1/resource-definitions/{rd}/resources/{node}", a.createResourceOnNode)
	mux.HandleFunc("PUT /v1/resource-definitions/{rd}/resources/{node}", a.modifyResource)
	mux.HandleFunc("DELETE /v1/resource-definitions/{rd}/resources/{node}", a.deleteResource)
	mux.HandleFunc("GET /v1/resource-definitions/{rd}/resources/{node}/volumes", a.listVolumes)
	mux.HandleFunc("GET /v1/resource-definitions/{rd}/resources/{node}/volumes/{nr}", a.getVolume)
	mux.HandleFunc("POST /v1/resource-definitions/{rd}/autoplace", a.autoplace)
	mux.HandleFunc("POST /v1/resource-definitions/{rd}/resources/{node}/make-available", a.makeAvailable)
	mux.HandleFunc("PUT /v1/resource-definitions/{rd}/resources/{node}/toggle-disk/diskless", a.toggleDisk(true))
	mux.HandleFunc("PUT /v1/resource-definitions/{rd}/resources/{node}/toggle-disk/diskless/{pool}", a.toggleDisk(true))
	mux.HandleFunc("PUT /v1/resource-definitions/{rd}/resources/{node}/toggle-disk/diskful", a.toggleDisk(false))
	mux.HandleFunc("PUT /v1/resource-definitions/{rd}/resources/{node}/toggle-disk/diskful/{pool}", a.toggleDisk(false))
	mux.HandleFunc("PUT /v1/resource-definitions/{rd}/resources/{node}/migrate-disk/{fromnode}", a.migrateDisk)
	mux.HandleFunc("PUT /v1/resource-definitions/{rd}/resources/{node}/migrate-disk/{fromnode}/{pool}", a.migrateDisk)
	mux.HandleFunc("POST /v1/resource-definitions/{rd}/resources/{node}/activate", a.activation("resource.activate"))
	mux.HandleFunc("POST /v1/resource-definitions/{rd}/resources/{node}/deactivate", a.activation("resource.deactivate"))

	mux.HandleFunc("GET /v1/view/snapshots", a.viewSnapshots)
	mux.HandleFunc("GET /v1/resource-definitions/{rd}/snapshots", a.listSnapshots)
	mux.HandleFunc("POST /v1/resource-definitions/{rd}/snapshots", a.createSnapshot)
	mux.HandleFunc("POST /v1/actions/snapshot/multi", a.snapshotMulti)
	mux.HandleFunc("GET /v1/resource-definitions/{rd}/snapshots/{snap}", a.getSnapshot)
	mux.HandleFunc("DELETE /v1/resource-definitions/{rd}/snapshots/{snap}", a.deleteSnapshot)
	mux.HandleFunc("POST /v1/resource-definitions/{rd}/snapshot-rollback/{snap}", a.rollbackSnapshot)
	mux.HandleFunc("POST /v1/resource-definitions/{rd}/snapshot-restore-resource/{snap}", a.restoreSnapshot)
	mux.HandleFunc("POST /v1/resource-definitions/{rd}/snapshot-restore-volume-definition/{snap}", a.restoreVolumeDefinitions)
	mux.HandleFunc("POST /v1/resource-definitions/{rd}/clone", a.cloneDefinition)
	mux.HandleFunc("GET /v1/resource-definitions/{rd}/clone/{clone}", a.cloneStatus)

	a.backupRoutes(mux)
	a.fileRoutes(mux)
	a.physicalRoutes(mux)
	a.scheduleRoutes(mux)
	a.statsRoutes(mux)

	mux.HandleFunc("GET /v1/error-reports", a.listErrorReports)
	mux.HandleFunc("GET /v1/error-reports/{id}", a.getErrorReport)

	mux.HandleFunc("/v1/", a.unsupported)
}

// unsupported answers every call Cairn does not serve (yet): 501 with FAIL_IMPL_ERROR,
// so that golinstor and the CLI show an error instead of "not found".
func (a *API) unsupported(w http.ResponseWriter, r *http.Request) {
	e := rc(maskError, 0, 0, codeImplError, "Cairn does not serve "+r.Method+" "+r.URL.Path+" of LINSTOR's API")
	e.Correction = "see docs/linstor.md for the calls Cairn serves; Cairn's own API is under /cairn/v1/"
	writeRCs(w, http.StatusNotImplemented, []ApiCallRc{e})
}

func (a *API) version(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": a.Version, "git_hash": "cairn-" + a.Version,
		"build_time": "", "rest_api_version": RESTAPIVersion})
}

// actor names the caller in the commands a request sends.
func (a *API) actor(r *http.Request) string {
	if a.Actor != nil {
		return a.Actor(r)
	}
	return "linstor:" + r.RemoteAddr
}

// command sends one Cairn command for a LINSTOR call and returns admission's reply; a
// refusal or a failure to reach admission is the error (a *cairn.Error).
func (a *API) command(r *http.Request, verb string, body any) (admission.Reply, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return admission.Reply{}, cairn.Errorf(cairn.CodeInternal, "encode %s: %v", verb, err)
	}
	reply, err := a.Send(r.Context(), verb, b, a.actor(r), nil)
	if err != nil {
		return reply, err
	}
	if !reply.OK {
		return reply, reply.Error
	}
	return reply, nil
}

// commit sends one command for a call and answers it: the refusal as LINSTOR's entry
// for (op, obj), or the success entry (msg, refs) with what Cairn said about it.
func (a *API) commit(w http.ResponseWriter, r *http.Request, verb string, cmd any, op, obj uint64, msg string, refs map[string]string) {
	reply, err := a.command(r, verb, cmd)
	if err != nil {
		writeFailure(w, op, obj, err)
		return
	}
	writeResults(w, results(success(op, obj, msg, refs), reply, op, obj))
}

// results answers an accepted command: the success entry, then what Cairn said about it
// as INFO entries. A command that appended nothing (Cairn kept the state as it was,
// e.g. a tiebreaker that stays) answers its warnings alone, as WARN_NO_EFFECT, without
// a success entry that would claim a change.
func results(ok ApiCallRc, reply admission.Reply, op, obj uint64) []ApiCallRc {
	changed := len(reply.Events) > 0 || len(reply.Warnings) == 0
	var out []ApiCallRc
	if changed {
		out = append(out, ok)
	}
	for _, w := range reply.Warnings {
		e := rc(maskWarn, op, obj, codeNoEffect, w)
		if changed {
			e = rc(maskInfo, op, obj, 0, w)
		}
		e.ObjRefs = ok.ObjRefs
		out = append(out, e)
	}
	return out
}

// readBody decodes a request body into v whatever its Content-Type (the CLI sends
// none); an empty body leaves v as it is. An unparseable body is answered 400 here and
// reported false.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		e := rc(maskError, 0, 0, codeInvldRequest, "unparseable request body: "+err.Error())
		writeRCs(w, http.StatusBadRequest, []ApiCallRc{e})
		return false
	}
	return true
}

// flexInt is an integer the client may send as a JSON number or string ("2": the CLI
// sends place_count so in group create and spawn).
type flexInt struct {
	Value int
	Set   bool
}

// UnmarshalJSON accepts 2, "2" and null.
func (f *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "null" || s == "" {
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not an integer: " + string(b))
	}
	f.Value, f.Set = n, true
	return nil
}

// MarshalJSON writes the number.
func (f flexInt) MarshalJSON() ([]byte, error) { return []byte(strconv.Itoa(f.Value)), nil }

// IsZero lets omitzero drop an unset value.
func (f flexInt) IsZero() bool { return !f.Set }

// queryList reads a repeated (or comma-separated) query parameter, in lower case for
// LINSTOR's case-insensitive name filters.
func queryList(q url.Values, key string) map[string]bool {
	out := map[string]bool{}
	for _, v := range q[key] {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out[strings.ToLower(s)] = true
			}
		}
	}
	return out
}

// matches reports whether name passes a name filter (an empty filter passes all).
func matches(filter map[string]bool, name string) bool {
	return len(filter) == 0 || filter[strings.ToLower(name)]
}

// pageBounds reads LINSTOR's offset and limit query parameters (limit 0: no limit;
// negative or unreadable values count as 0).
func pageBounds(q url.Values) (offset, limit int) {
	offset, _ = strconv.Atoi(q.Get("offset"))
	limit, _ = strconv.Atoi(q.Get("limit"))
	return max(offset, 0), max(limit, 0)
}

// page applies LINSTOR's offset and limit query parameters to a list in its stable
// order (limit 0 or absent: everything from offset).
func page[T any](q url.Values, items []T) []T {
	offset, limit := pageBounds(q)
	if offset >= len(items) {
		return []T{}
	}
	items = items[offset:]
	if limit > 0 && limit < len(items) {
		items = items[:limit]
	}
	return items
}

// read runs fn on one consistent snapshot of the views (unavailable when they cannot be
// read) and returns its error.
func (a *API) read(fn func(v *projections.View) error) error {
	v, err := a.DB.Read()
	if err != nil {
		return cairn.Errorf(cairn.CodeUnavailable, "views unreadable: %v", err)
	}
	defer v.Close()
	return fn(v)
}

// definitionNow reads one definition as the views hold it now (not_found about it).
func (a *API) definitionNow(name string) (rd projections.ResourceDefinition, err error) {
	err = a.read(func(v *projections.View) error {
		rd, err = definition(v, name)
		return err
	})
	return rd, err
}

// withView runs fn on one consistent snapshot of the views; an error fn returns is
// answered as LINSTOR's entry for (op, obj).
func (a *API) withView(w http.ResponseWriter, obj uint64, fn func(v *projections.View) (any, error)) {
	v, err := a.DB.Read()
	if err != nil {
		writeFailure(w, 0, obj, cairn.Errorf(cairn.CodeUnavailable, "views unreadable: %v", err))
		return
	}
	defer v.Close()
	out, err := fn(v)
	if err != nil {
		writeFailure(w, 0, obj, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// writeFailure answers one error entry with its status.
func writeFailure(w http.ResponseWriter, op, obj uint64, err error) {
	rcs := []ApiCallRc{fromError(op, obj, err)}
	writeRCs(w, statusOf(rcs), rcs)
}

// writeRCs answers a list of entries.
func writeRCs(w http.ResponseWriter, status int, rcs []ApiCallRc) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, rcs)
}

// writeResults answers entries with the status they imply.
func writeResults(w http.ResponseWriter, rcs []ApiCallRc) { writeRCs(w, statusOf(rcs), rcs) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteAuthError answers a refused sign-in as LINSTOR does: 401 with
// FAIL_SIGN_IN_MISSING_CREDENTIALS (no credentials sent) or FAIL_SIGN_IN, 403 with
// FAIL_ACC_DENIED_COMMAND, 429 with FAIL_SIGN_IN, 503 (a serve that cannot vouch for
// tokens) with FAIL_UNKNOWN_ERROR.
func WriteAuthError(w http.ResponseWriter, status int, missing bool, message string) {
	code := codeSignIn
	switch {
	case status == http.StatusServiceUnavailable:
		code = codeUnknownError
	case status == http.StatusForbidden:
		code = codeAccDenied
	case status == http.StatusUnauthorized && missing:
		code = codeSignInMissing
	}
	writeRCs(w, status, []ApiCallRc{rc(maskError, 0, 0, code, message)})
}

// notFound is the error of a read that names something that does not exist.
func notFound(object, format string, args ...any) error {
	return cairn.Errorf(cairn.CodeNotFound, format, args...).About(object)
}
