package linstor

import (
	"encoding/base64"
	"net/http"
	"path"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
)

// ExternalFile is LINSTOR's external file: its path and, when asked for, its content in
// base64.
type ExternalFile struct {
	Path    string `json:"path"`
	Content string `json:"content,omitempty"`
}

// fileRoutes are LINSTOR's external files (golinstor's Controller.*ExternalFile and
// ResourceDefinitions.(Un)DeployExternalFile, the CLI's `linstor file`): the files
// linstor-gateway writes its drbd-reactor configuration with. The file's name in the URL
// is its path, escaped.
func (a *API) fileRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/files", a.listFiles)
	mux.HandleFunc("GET /v1/files/{file}", a.getFile)
	mux.HandleFunc("PUT /v1/files/{file}", a.putFile)
	mux.HandleFunc("DELETE /v1/files/{file}", a.deleteFile)
	mux.HandleFunc("GET /v1/files/{file}/check/{node}", a.checkFile)
	mux.HandleFunc("GET /v1/files/{file}/status/{node}", a.fileStatus)
	mux.HandleFunc("POST /v1/resource-definitions/{rd}/files/{file}", a.deployFile("rd.file-deploy", opModify, "deployed with"))
	mux.HandleFunc("DELETE /v1/resource-definitions/{rd}/files/{file}", a.deployFile("rd.file-undeploy", opDelete, "no longer deployed with"))
}

// listFiles lists every file by path; ?content=true adds the contents.
func (a *API) listFiles(w http.ResponseWriter, r *http.Request) {
	content := r.URL.Query().Get("content") == "true"
	a.streamPage(w, r, objExtFile, func(v *projections.View, emit func(any) (bool, error)) error {
		return v.EachExternalFile(func(f projections.ExternalFile) (bool, error) {
			return emit(externalFile(f, content))
		})
	})
}

func externalFile(f projections.ExternalFile, content bool) ExternalFile {
	out := ExternalFile{Path: f.Path}
	if content {
		out.Content = base64.StdEncoding.EncodeToString(f.Content)
	}
	return out
}

func (a *API) getFile(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("file")
	a.withView(w, objExtFile, func(v *projections.View) (any, error) {
		f, ok, err := v.ExternalFile(p)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, cairn.Errorf(cairn.CodeNotFound, "external file %s does not exist", p).About(cairn.ObjExternalFile)
		}
		return externalFile(f, true), nil
	})
}

// putFile registers a file or replaces its content (file.set). The body's path, when
// given, must be the URL's.
func (a *API) putFile(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("file")
	var in ExternalFile
	if !readBody(w, r, &in) {
		return
	}
	if in.Path != "" && in.Path != p {
		writeFailure(w, opModify, objExtFile, cairn.InvalidField("path", "the body names %q, the URL %q", in.Path, p))
		return
	}
	content, err := base64.StdEncoding.DecodeString(in.Content)
	if err != nil {
		writeFailure(w, opModify, objExtFile, cairn.InvalidField("content", "not base64: %v", err))
		return
	}
	a.commit(w, r, "file.set", map[string]any{"path": p, "content": content}, opModify, objExtFile,
		"External file '"+p+"' registered.", map[string]string{"ExternalFile": p})
}

func (a *API) deleteFile(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("file")
	reply, err := a.command(r, "file.delete", map[string]any{"path": p})
	if cairn.ErrorCode(err) == cairn.CodeNotFound {
		writeResults(w, []ApiCallRc{rc(maskWarn, opDelete, objExtFile, codeWarnNotFound, "External file '"+p+"' not found.")})
		return
	}
	if err != nil {
		writeFailure(w, opDelete, objExtFile, err)
		return
	}
	writeResults(w, results(success(opDelete, objExtFile, "External file '"+p+"' deleted.", map[string]string{"ExternalFile": p}), reply, opDelete, objExtFile))
}

// deployFile answers POST (deploy) and DELETE (undeploy) of a file with a definition.
func (a *API) deployFile(verb string, op uint64, what string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rd, p := r.PathValue("rd"), r.PathValue("file")
		a.commit(w, r, verb, map[string]any{"resource": rd, "path": p}, op, objExtFile,
			"External file '"+p+"' "+what+" resource definition '"+rd+"'.", map[string]string{"ExternalFile": p, "RscDfn": rd})
	}
}

// ExtFileCheckResult says whether a node's agent may write an external file.
type ExtFileCheckResult struct {
	Allowed bool `json:"allowed"`
}

// ExtFileStatusResult is where a node holds an external file and whether its content
// is the registered one.
type ExtFileStatusResult struct {
	ActualPath   string `json:"actual_path,omitempty"`
	ContentMatch bool   `json:"content_match"`
}

// fileStatus answers what node's agent found of the file when it last wrote or removed
// one (its files report): the path when it is there, and whether its content is the
// registered content. A file or node that does not exist is 404.
func (a *API) fileStatus(w http.ResponseWriter, r *http.Request) {
	p, node := r.PathValue("file"), r.PathValue("node")
	var f projections.ExternalFile
	fileOK := false
	if err := a.read(func(v *projections.View) (err error) {
		f, fileOK, err = v.ExternalFile(p)
		return err
	}); err != nil {
		writeFailure(w, 0, objExtFile, err)
		return
	}
	if !fileOK {
		writeFailure(w, 0, objExtFile, cairn.Errorf(cairn.CodeNotFound, "external file %s does not exist", p).About(cairn.ObjExternalFile))
		return
	}
	if !a.nodeExists(w, node) {
		return
	}
	var rep events.FilesReport
	if a.Status != nil {
		if _, err := a.lastStatus(r.Context(), node, events.FilesKind, &rep); err != nil {
			writeFailure(w, 0, objNode, cairn.Errorf(cairn.CodeUnavailable, "files report of %s: %v", node, err))
			return
		}
	}
	out := ExtFileStatusResult{}
	if sum, ok := rep.Files[p]; ok && sum != "" {
		out.ActualPath, out.ContentMatch = p, sum == f.SHA256
	}
	writeJSON(w, http.StatusOK, out)
}

// checkFile answers whether node's agent would write the file: its path is under one
// of the --allow-ext-files prefixes the agent announces in its heartbeats (false while it
// sent none). A node that does not exist is 404.
func (a *API) checkFile(w http.ResponseWriter, r *http.Request) {
	p, node := r.PathValue("file"), r.PathValue("node")
	if !a.nodeExists(w, node) {
		return
	}
	var hb events.Heartbeat
	if a.Status != nil {
		if _, err := a.lastStatus(r.Context(), node, "node", &hb); err != nil {
			writeFailure(w, 0, objNode, cairn.Errorf(cairn.CodeUnavailable, "heartbeat of %s: %v", node, err))
			return
		}
	}
	writeJSON(w, http.StatusOK, ExtFileCheckResult{Allowed: path.Clean(p) == p && events.PathAllowed(hb.AllowExtFiles, p)})
}
