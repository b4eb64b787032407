package linstor

import (
	"net/http"
	"strings"
	"time"

	"github.com/cairn-io/cairn"
)

// ApiCallRc is LINSTOR's result entry: every write and every error answers a list of
// them. RetCode carries the type bits (error, warning, info), the operation and object
// masks and the code (see the constants below; values are LINSTOR's sharedconsts).
type ApiCallRc struct {
	RetCode        int64             `json:"ret_code"`
	Message        string            `json:"message"`
	Cause          string            `json:"cause,omitempty"`
	Details        string            `json:"details,omitempty"`
	Correction     string            `json:"correction,omitempty"`
	ErrorReportIDs []string          `json:"error_report_ids,omitempty"`
	ObjRefs        map[string]string `json:"obj_refs,omitempty"`
	CreatedAt      string            `json:"created_at,omitempty"`

	// retry marks a failure that is worth sending again as it is (Cairn's unavailable
	// and conflict): statusOf answers 503, and writeRCs adds Retry-After.
	retry bool
}

// Type bits, operation masks and object masks of a ret_code.
const (
	maskError  uint64 = 0xC000000000000000
	maskWarn   uint64 = 0x8000000000000000
	maskInfo   uint64 = 0x4000000000000000
	maskTypes  uint64 = 0xC000000000000000
	maskBitsOp uint64 = 0x0000000003000000

	opCreate uint64 = 0x01000000
	opModify uint64 = 0x02000000
	opDelete uint64 = 0x03000000

	objNode     uint64 = 0x3C0000
	objRscDfn   uint64 = 0x380000
	objRsc      uint64 = 0x340000
	objVlmDfn   uint64 = 0x300000
	objVlm      uint64 = 0x2C0000
	objStorPool uint64 = 0x140000
	objCtrlConf uint64 = 0x100000
	objKVS      uint64 = 0x400000
	objNetIf    uint64 = 0x1C0000
	objRscGrp   uint64 = 0x440000
	objExtFile  uint64 = 0x500000
)

// Codes (the low 15 bits); the type bits are added where they are used.
const (
	codeCreated  uint64 = 1
	codeDeleted  uint64 = 2
	codeModified uint64 = 3

	codeInvldNodeName    uint64 = 200
	codeInvldNodeType    uint64 = 201
	codeInvldRscName     uint64 = 202
	codeInvldVlmNr       uint64 = 205
	codeInvldVlmSize     uint64 = 206
	codeInvldStorPool    uint64 = 208
	codeInvldNetAddr     uint64 = 210
	codeInvldProp        uint64 = 213
	codeInvldPlaceCount  uint64 = 219
	codeInvldStorDriver  uint64 = 221
	codeInvldLayerStack  uint64 = 225
	codeInvldRequest     uint64 = 234
	codeInvldRscGrpName  uint64 = 237
	codeNotFoundNode     uint64 = 300
	codeNotFoundRscDfn   uint64 = 301
	codeNotFoundRsc      uint64 = 302
	codeNotFoundVlmDfn   uint64 = 303
	codeNotFoundVlm      uint64 = 304
	codeNotFoundNetIf    uint64 = 305
	codeNotFoundStorPool uint64 = 310
	codeNotFoundRscGrp   uint64 = 317
	codeNotFoundKVS      uint64 = 316
	codeNotFoundExtFile  uint64 = 320
	codeInvldExtFileName uint64 = 235
	codeAccDenied        uint64 = 412 // FAIL_ACC_DENIED_COMMAND
	codeExistsNode       uint64 = 500
	codeExistsNetIf      uint64 = 505
	codeExistsRscDfn     uint64 = 501
	codeExistsRsc        uint64 = 502
	codeExistsVlmDfn     uint64 = 503
	codeExistsStorPool   uint64 = 510
	codeExistsRscGrp     uint64 = 522
	codeNotEnoughSpace   uint64 = 980
	codeStorPoolUnusable uint64 = 990 // FAIL_STOR_POOL_CONFIGURATION_ERROR
	codeNotEnoughNodes   uint64 = 996
	codeInUse            uint64 = 997
	codeUnknownError     uint64 = 998
	codeImplError        uint64 = 999 // FAIL_IMPL_ERROR: what Cairn does not serve
	codeNoEffect         uint64 = 3001
	codeWarnNotFound     uint64 = 3000
	codeInfoNoop         uint64 = 10007
	codeSignIn           uint64 = 10000
	codeSignInMissing    uint64 = 10001
)

// rc builds one entry: typ is maskError, maskWarn, maskInfo or 0 (success).
func rc(typ, op, obj, code uint64, message string) ApiCallRc {
	return ApiCallRc{RetCode: int64(typ | op | obj | code), Message: message, CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)}
}

// success is the success entry of a call: CREATED, DELETED or MODIFIED by op.
func success(op, obj uint64, message string, refs map[string]string) ApiCallRc {
	code := codeCreated
	switch op {
	case opDelete:
		code = codeDeleted
	case opModify:
		code = codeModified
	}
	e := rc(0, op, obj, code, message)
	e.ObjRefs = refs
	return e
}

// isError reports whether a ret_code has both error bits (test it before warning).
func isError(retCode int64) bool { return uint64(retCode)&maskTypes == maskError }

// statusOf is the HTTP status LINSTOR answers for a list of entries: the first error
// decides (404 not found, 403 access denied, 401 missing credentials, 501 what Cairn
// does not serve, 503 a failure to retry as it is, 500 any other), otherwise 201 when something was created, 200. An
// unparseable body (400) is answered before any entry exists.
func statusOf(rcs []ApiCallRc) int {
	created := false
	for _, r := range rcs {
		u := uint64(r.RetCode)
		if !isError(r.RetCode) {
			if u&maskTypes == 0 && u&maskBitsOp == opCreate && u&0x7FFF == codeCreated {
				created = true
			}
			continue
		}
		switch code := u & 0x7FFF; {
		case code == codeSignInMissing && u&^maskTypes == codeSignInMissing:
			return http.StatusUnauthorized
		case code >= 300 && code < 400:
			return http.StatusNotFound
		case code >= 400 && code < 500:
			return http.StatusForbidden
		case code == codeImplError:
			return http.StatusNotImplemented
		case r.retry:
			return http.StatusServiceUnavailable
		}
		return http.StatusInternalServerError
	}
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// objectMask maps the kind of object a Cairn error is about to LINSTOR's object mask;
// fallback when the error names none.
func objectMask(object string, fallback uint64) uint64 {
	switch object {
	case cairn.ObjNode:
		return objNode
	case cairn.ObjStoragePool:
		return objStorPool
	case cairn.ObjResourceGroup:
		return objRscGrp
	case cairn.ObjResourceDefinition:
		return objRscDfn
	case cairn.ObjVolumeDefinition:
		return objVlmDfn
	case cairn.ObjResource:
		return objRsc
	case cairn.ObjRemote:
		return objRemote
	case cairn.ObjBackup:
		return objBackup
	case cairn.ObjSchedule:
		return objSchedule
	case cairn.ObjExternalFile:
		return objExtFile
	}
	return fallback
}

var notFoundCodes = map[uint64]uint64{objNode: codeNotFoundNode, objRscDfn: codeNotFoundRscDfn, objRsc: codeNotFoundRsc,
	objVlmDfn: codeNotFoundVlmDfn, objVlm: codeNotFoundVlm, objNetIf: codeNotFoundNetIf, objStorPool: codeNotFoundStorPool, objRscGrp: codeNotFoundRscGrp, objKVS: codeNotFoundKVS, objExtFile: codeNotFoundExtFile}

var existsCodes = map[uint64]uint64{objNode: codeExistsNode, objRscDfn: codeExistsRscDfn, objRsc: codeExistsRsc,
	objVlmDfn: codeExistsVlmDfn, objStorPool: codeExistsStorPool, objRscGrp: codeExistsRscGrp}

// invalidCode maps the request field a Cairn invalid_argument names to LINSTOR's
// FAIL_INVLD_* code.
func invalidCode(field string, obj uint64) uint64 {
	head, _, _ := strings.Cut(field, ".")
	head, _, _ = strings.Cut(head, "[")
	switch head {
	case "name", "resource", "node", "resource_group", "storage_pool":
		switch {
		case head == "node" || head == "name" && obj == objNode:
			return codeInvldNodeName
		case head == "resource_group" || head == "name" && obj == objRscGrp:
			return codeInvldRscGrpName
		case head == "storage_pool" || head == "name" && obj == objStorPool:
			return codeInvldStorPool
		}
		return codeInvldRscName
	case "address", "host":
		return codeInvldNetAddr
	case "place_count":
		return codeInvldPlaceCount
	case "size_kib", "capacity_kib":
		return codeInvldVlmSize
	case "volume":
		return codeInvldVlmNr
	case "provider", "pool":
		return codeInvldStorDriver
	case "drbd_options", "unset", "set", "properties", "failure_domain", "physical_label", "replicas_on_same", "replicas_on_different":
		return codeInvldProp
	case "role":
		return codeInvldNodeType
	case "layer_stack":
		return codeInvldLayerStack
	case "path", "content":
		if obj == objExtFile {
			return codeInvldExtFileName
		}
	}
	return codeInvldRequest
}

// fromError translates a Cairn error into LINSTOR's entry for a call doing op on obj:
// not_found and already_exists by the object the error names, invalid_argument by its
// field, precondition_failed by what its details carry (an autoplace short of nodes,
// a pool without room, an object still in use), the rest FAIL_UNKNOWN_ERROR; unavailable
// and conflict (nothing was done: the same request may succeed when sent again) are
// marked to retry (HTTP 503 with Retry-After, which generic HTTP clients and Kubernetes'
// retries honour; LINSTOR has no ret_code for it). The message keeps Cairn's
// explanation; Details carries Cairn's code.
func fromError(op, obj uint64, err error) ApiCallRc {
	e := cairn.AsError(err)
	code := codeUnknownError
	o := obj
	switch e.Code {
	case cairn.CodeNotFound:
		o = objectMask(e.Object, obj)
		code = notFoundCodes[o]
		if code == 0 {
			code = codeNotFoundRscDfn
		}
	case cairn.CodeAlreadyExists:
		o = objectMask(e.Object, obj)
		code = existsCodes[o]
		if code == 0 {
			code = codeExistsRscDfn
		}
	case cairn.CodeInvalidArgument:
		code = invalidCode(e.Field, obj)
	case cairn.CodeUnauthorized:
		code = codeAccDenied
	case cairn.CodePreconditionFailed, cairn.CodeDomainUnbalanced:
		switch {
		case e.Details["short"] != nil:
			code = codeNotEnoughNodes
		case e.Details["free_kib"] != nil:
			code = codeNotEnoughSpace
		case obj == objRscGrp && e.Details["resources"] != nil:
			// A group that still has definitions: LINSTOR answers FAIL_EXISTS_RSC_DFN,
			// which linstor-csi's DeleteVolume takes for "still in use by another volume".
			code = codeExistsRscDfn
		case e.Details["nodes"] != nil || e.Details["in_use"] != nil:
			code = codeInUse
		}
	}
	r := rc(maskError, op, o, code, e.Message)
	r.retry = e.Code == cairn.CodeUnavailable || e.Code == cairn.CodeConflict
	if r.retry {
		r.Correction = "nothing was changed: send the same request again"
	}
	r.Details = "cairn error code: " + e.Code
	if e.Field != "" {
		r.Details += "; field: " + e.Field
	}
	return r
}
