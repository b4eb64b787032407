package linstor

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/drbd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Values from LINSTOR's sharedconsts.py (linstor-common), written out so the test does
// not take them from the code under test.
const (
	wantNodeCreated    int64 = 20709377             // CREATED | MASK_CRT | MASK_NODE
	wantNodeExists     int64 = -4611686018406678028 // FAIL_EXISTS_NODE | MASK_CRT | MASK_NODE
	wantRscDfnNotFound int64 = -4611686018373385939 // FAIL_NOT_FOUND_RSC_DFN | MASK_DEL | MASK_RSC_DFN
)

func TestRetCodesAsLINSTORSerialisesThem(t *testing.T) {
	assert.Equal(t, wantNodeCreated, success(opCreate, objNode, fmt.Sprintf("New node '%s' registered.", "n1"), nil).RetCode)
	assert.Equal(t, wantNodeExists, fromError(opCreate, objNode, cairn.Errorf(cairn.CodeAlreadyExists, "x").About(cairn.ObjNode)).RetCode)
	assert.Equal(t, wantRscDfnNotFound, fromError(opDelete, objRscDfn, cairn.Errorf(cairn.CodeNotFound, "x").About(cairn.ObjResourceDefinition)).RetCode)
	b, err := json.Marshal(rc(maskError, 0, 0, codeImplError, "m"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"ret_code":-4611686018427386905`, "a signed 64-bit integer")
}

func TestFromErrorMapsEveryCairnCode(t *testing.T) {
	cases := []struct {
		name string
		err  error
		obj  uint64
		code uint64
		http int
	}{
		{"not found names its object", cairn.Errorf(cairn.CodeNotFound, "node").About(cairn.ObjNode), objRsc, codeNotFoundNode, 404},
		{"not found without object: the call's", cairn.Errorf(cairn.CodeNotFound, "x"), objRscGrp, codeNotFoundRscGrp, 404},
		{"exists", cairn.Errorf(cairn.CodeAlreadyExists, "x").About(cairn.ObjVolumeDefinition), objRscDfn, codeExistsVlmDfn, 500},
		{"invalid address", cairn.InvalidField("address", "x"), objNode, codeInvldNetAddr, 500},
		{"invalid name of a group", cairn.InvalidField("name", "x"), objRscGrp, codeInvldRscGrpName, 500},
		{"invalid option", cairn.InvalidField("drbd_options.quorum", "x"), objRscDfn, codeInvldProp, 500},
		{"invalid size", cairn.InvalidField("size_kib", "x"), objVlmDfn, codeInvldVlmSize, 500},
		{"invalid layers", cairn.InvalidField("layer_stack", "x"), objRscGrp, codeInvldLayerStack, 500},
		{"invalid other", cairn.InvalidField("", "x"), objRscDfn, codeInvldRequest, 500},
		{"autoplace short", cairn.Errorf(cairn.CodePreconditionFailed, "x").WithDetails(map[string]any{"short": 1}), objRsc, codeNotEnoughNodes, 500},
		{"no room", cairn.Errorf(cairn.CodePreconditionFailed, "x").WithDetails(map[string]any{"free_kib": 1}), objRsc, codeNotEnoughSpace, 500},
		{"in use", cairn.Errorf(cairn.CodePreconditionFailed, "x").WithDetails(map[string]any{"nodes": []string{"n1"}}), objRscDfn, codeInUse, 500},
		{"a group with definitions", cairn.Errorf(cairn.CodePreconditionFailed, "x").WithDetails(map[string]any{"resources": []string{"r1"}, "in_use": true}), objRscGrp, codeExistsRscDfn, 500},
		{"other precondition", cairn.Errorf(cairn.CodePreconditionFailed, "x"), objRscDfn, codeUnknownError, 500},
		{"denied", cairn.Errorf(cairn.CodeUnauthorized, "x"), objNode, codeAccDenied, 403},
		{"unavailable: retry", cairn.Errorf(cairn.CodeUnavailable, "x"), objNode, codeUnknownError, 503},
		{"conflict: retry", cairn.Errorf(cairn.CodeConflict, "x"), objRscDfn, codeUnknownError, 503},
		{"a bug", assert.AnError, objNode, codeUnknownError, 500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := fromError(opCreate, c.obj, c.err)
			u := uint64(r.RetCode)
			assert.True(t, isError(r.RetCode))
			assert.Equal(t, c.code, u&0x7FFF)
			assert.Equal(t, opCreate, u&maskBitsOp)
			assert.Equal(t, c.http, statusOf([]ApiCallRc{r}))
			assert.Equal(t, cairn.AsError(c.err).Message, r.Message, "Cairn's explanation stays")
		})
	}
}

func TestStatusOfResults(t *testing.T) {
	assert.Equal(t, http.StatusCreated, statusOf([]ApiCallRc{success(opCreate, objRsc, "r", nil)}))
	assert.Equal(t, http.StatusOK, statusOf([]ApiCallRc{success(opDelete, objRsc, "r", nil)}))
	assert.Equal(t, http.StatusOK, statusOf([]ApiCallRc{rc(maskWarn, opDelete, objRsc, codeWarnNotFound, "w")}))
	assert.Equal(t, http.StatusNotImplemented, statusOf([]ApiCallRc{rc(maskError, 0, 0, codeImplError, "x")}))
	// The first error decides, whatever succeeded before it.
	assert.Equal(t, http.StatusNotFound, statusOf([]ApiCallRc{success(opCreate, objRsc, "r", nil),
		fromError(opCreate, objRsc, cairn.Errorf(cairn.CodeNotFound, "x"))}))
}

func TestOptionsRoundTripAsProperties(t *testing.T) {
	props := map[string]string{
		"DrbdOptions/Net/protocol": "C", "DrbdOptions/Net/allow-two-primaries": "yes", "DrbdOptions/Net/max-buffers": "8000",
		"DrbdOptions/Resource/auto-promote": "no", "DrbdOptions/Resource/quorum": "majority", "DrbdOptions/Resource/on-no-quorum": "io-error",
		"DrbdOptions/Disk/on-io-error": "detach", "DrbdOptions/Disk/al-extents": "6007", "DrbdOptions/Net/ping-timeout": "10",
	}
	props["Aux/csi-provisioning-completed-by"] = "linstor-csi/v1" // free-form: kept as given
	opts, free, err := optionsOf(props)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"Aux/csi-provisioning-completed-by": "linstor-csi/v1"}, free)
	b, err := json.Marshal(opts)
	require.NoError(t, err)
	var o drbd.Options
	require.NoError(t, json.Unmarshal(b, &o), "what the command carries decodes as Cairn's options")
	require.NoError(t, o.Validate())
	assert.Equal(t, props, propsOf(o, free))

	_, _, err = optionsOf(map[string]string{"DrbdOptions/Net/max-buffers": "many"})
	assert.Equal(t, "drbd_options.max_buffers", cairn.AsError(err).Field)
	_, _, err = optionsOf(map[string]string{"DrbdOptions/Resource/auto-promote": "maybe"})
	assert.Equal(t, "drbd_options.auto_promote", cairn.AsError(err).Field)
	unset, unsetFree := unsetOf([]string{"DrbdOptions/Net/protocol", "DrbdOptions/Net/ping-timeout", "Aux/x"})
	assert.Equal(t, []string{"protocol", "DrbdOptions/Net/ping-timeout"}, unset)
	assert.Equal(t, []string{"Aux/x"}, unsetFree)
	assert.Nil(t, propsOf(drbd.Options{}, nil), "no options: no props field")
}

func TestFlexIntTakesNumbersAndStrings(t *testing.T) {
	var f struct {
		A flexInt `json:"a"`
		B flexInt `json:"b"`
		C flexInt `json:"c"`
		D flexInt `json:"d"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"a":2,"b":"3","c":null}`), &f))
	assert.Equal(t, flexInt{2, true}, f.A)
	assert.Equal(t, flexInt{3, true}, f.B)
	assert.False(t, f.C.Set)
	assert.False(t, f.D.Set)
	assert.Error(t, json.Unmarshal([]byte(`{"a":"two"}`), &f))
}

func TestPageAndFilters(t *testing.T) {
	items := []int{0, 1, 2, 3, 4}
	q := func(s string) url.Values { v, _ := url.ParseQuery(s); return v }
	assert.Equal(t, items, page(q(""), items))
	assert.Equal(t, []int{1, 2}, page(q("offset=1&limit=2"), items))
	assert.Equal(t, []int{4}, page(q("offset=4&limit=10"), items))
	assert.Equal(t, []int{}, page(q("offset=9"), items))
	assert.Equal(t, items, page(q("offset=-3"), items))
	f := queryList(q("nodes=A&nodes=b,c"), "nodes")
	assert.True(t, matches(f, "a") && matches(f, "B") && matches(f, "c"))
	assert.False(t, matches(f, "d"))
	assert.True(t, matches(queryList(q(""), "nodes"), "anything"))
	assert.Equal(t, []string{"site", "failure_domain", "room=r1"}, cairnKeys([]string{"Aux/site", "failure_domain", "Aux/room=r1"}), "a value stays: replicas_on_same key=value")
	assert.Equal(t, []string{"Aux/zone=z1", "failure_domain=d1"}, auxKeys([]string{"zone=z1", "failure_domain=d1"}))
	assert.Equal(t, []string{"Aux/site", "failure_domain"}, auxKeys([]string{"site", "failure_domain"}))
}
