package test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-io/cairn/test/testtools"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// sharedFile finds a file of the team's shared directory (../shared beside the
// repository, or $CAIRN_SHARED): the LINSTOR OpenAPI document and the unmodified LINSTOR
// CLI. Missing, the test skips, or fails under CAIRN_REQUIRE_TOOLS=1.
func sharedFile(t *testing.T, rel string) string {
	t.Helper()
	dirs := []string{os.Getenv("CAIRN_SHARED"), filepath.Join("..", "..", "shared"), "/work/shared"}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		p, err := filepath.Abs(filepath.Join(d, rel))
		require.NoError(t, err)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv(testtools.RequireEnv) == "1" {
		t.Fatalf("shared/%s not found (set CAIRN_SHARED), and %s=1 requires it", rel, testtools.RequireEnv)
	}
	t.Skipf("shared/%s not found (set CAIRN_SHARED)", rel)
	return ""
}

// openAPI checks responses against LINSTOR's OpenAPI document: the schema the document
// declares for the operation and status, resolved through $ref. Errors without a
// declared response are checked as ApiCallRcList (what golinstor decodes every error
// body as); the document's OperationFailed says ApiCallRc where the controller answers
// a list, so a list there is checked item by item.
type openAPI struct {
	doc      map[string]any
	compiler *jsonschema.Compiler
	paths    []openAPIPath
}

type openAPIPath struct {
	template string
	re       *regexp.Regexp
}

func loadOpenAPI(t *testing.T) *openAPI {
	t.Helper()
	raw, err := os.ReadFile(sharedFile(t, "reference/linstor-rest_v1_openapi.yaml"))
	require.NoError(t, err)
	var y any
	require.NoError(t, yaml.Unmarshal(raw, &y))
	correctVolumeLayer(y)
	js, err := json.Marshal(y)
	require.NoError(t, err)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("file:///openapi.json", doc))
	o := &openAPI{doc: doc.(map[string]any), compiler: c}
	for p := range o.doc["paths"].(map[string]any) {
		segs := strings.Split(p, "/")
		for i, seg := range segs {
			if strings.HasPrefix(seg, "{") {
				segs[i] = `[^/]+`
			} else {
				segs[i] = regexp.QuoteMeta(seg)
			}
		}
		re := regexp.MustCompile("^" + strings.Join(segs, "/") + "$")
		o.paths = append(o.paths, openAPIPath{p, re})
	}
	// Literal paths before templated ones (/v1/nodes/storage-pools before /v1/nodes/{node}).
	sort.Slice(o.paths, func(i, j int) bool {
		return strings.Count(o.paths[i].template, "{") < strings.Count(o.paths[j].template, "{")
	})
	return o
}

// correctVolumeLayer fixes one flaw of the document: a volume layer's data is "oneOf"
// seven schemas with no required field and no discriminator, so any object with data
// matches several and fails (LINSTOR's own answers would). The layer's type says which
// schema its data is: DRBD data must be a DrbdVolume, STORAGE a StorageVolume, and so on.
func correctVolumeLayer(doc any) {
	schemas := doc.(map[string]any)["components"].(map[string]any)["schemas"].(map[string]any)
	vl := schemas["VolumeLayer"].(map[string]any)
	props := vl["properties"].(map[string]any)
	delete(props, "data")
	var cases []any
	for typ, schema := range map[string]string{"DRBD": "DrbdVolume", "LUKS": "LUKSVolume", "STORAGE": "StorageVolume",
		"NVME": "NVMEVolume", "WRITECACHE": "WritecacheVolume", "CACHE": "CacheVolume", "BCACHE": "BCacheVolume"} {
		cases = append(cases, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"type": map[string]any{"const": typ}}},
			"then": map[string]any{"properties": map[string]any{"data": map[string]any{"$ref": "#/components/schemas/" + schema}}},
		})
	}
	vl["allOf"] = cases
}

func pointer(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(p, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// schemaFor returns the JSON pointer of the response schema of (method, path, status):
// what the document declares; for an error it does not declare, ApiCallRcList; for the
// GET of one object it leaves out, its parent list's item.
func (o *openAPI) schemaFor(t *testing.T, method, path string, status int) string {
	t.Helper()
	path, _, _ = strings.Cut(path, "?")
	for _, p := range o.paths {
		if !p.re.MatchString(path) {
			continue
		}
		op, ok := o.doc["paths"].(map[string]any)[p.template].(map[string]any)[strings.ToLower(method)].(map[string]any)
		if !ok && method == "GET" && status == 200 && strings.HasSuffix(p.template, "}") {
			// The document leaves out the GET of one object that the controller serves
			// (and golinstor calls): it answers one item of its parent's list.
			parent := path[:strings.LastIndex(path, "/")]
			return o.schemaFor(t, method, parent, status) + "/items"
		}
		if !ok {
			break
		}
		responses := op["responses"].(map[string]any)
		resp, ok := responses[strconv.Itoa(status)].(map[string]any)
		if !ok {
			break
		}
		ptr := pointer("paths", p.template, strings.ToLower(method), "responses", strconv.Itoa(status))
		if ref, ok := resp["$ref"].(string); ok {
			ptr = strings.TrimPrefix(ref, "#")
			resp = o.at(ptr)
		}
		if _, ok := resp["content"]; !ok {
			return ""
		}
		return ptr + pointer("content", "application/json", "schema")
	}
	if status >= 400 {
		return "/components/schemas/ApiCallRcList"
	}
	t.Fatalf("the OpenAPI document declares no %d response for %s %s", status, method, path)
	return ""
}

func (o *openAPI) at(ptr string) map[string]any {
	var cur any = o.doc
	for _, part := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		cur = cur.(map[string]any)[part]
	}
	return cur.(map[string]any)
}

// check validates one response body against the document.
func (o *openAPI) check(t *testing.T, method, path string, status int, body string) {
	t.Helper()
	ptr := o.schemaFor(t, method, path, status)
	if ptr == "" {
		return
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
	require.NoError(t, err, "%s %s: %d %s", method, path, status, body)
	if ref, _ := o.at(ptr)["$ref"].(string); ref == "#/components/schemas/ApiCallRc" {
		if list, ok := v.([]any); ok {
			ptr = "/components/schemas/ApiCallRcList"
			v = list
		}
	}
	s, err := o.compiler.Compile("file:///openapi.json#" + ptr)
	require.NoError(t, err)
	require.NoError(t, s.Validate(v), "%s %s answered %d %s", method, path, status, body)
}
