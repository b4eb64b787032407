package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/gateway/linstor"
	"github.com/cairn-io/cairn/storage/backup"
	"github.com/cairn-io/cairn/storage/backup/httpstore"
)

// maxReceivedObject bounds one object another cluster sends: a chunk (backup.ChunkSize)
// with an encrypted chunk's overhead, or a manifest.
const maxReceivedObject = backup.ChunkSize + 64<<10

// receivedRoutes serve this cluster's received store to other clusters shipping
// backups here (docs/backups.md "Shipping to another cluster"): objects under their
// keys, each PUT checked against its SHA-256 (httpstore.SumHeader). Every method
// needs the operator role: the objects are volume data.
func (g *Gateway) receivedRoutes(mux *http.ServeMux) {
	if g.Received == nil {
		return
	}
	mux.HandleFunc("GET "+httpstore.ObjectsPath, g.listReceived)
	mux.HandleFunc("GET "+httpstore.ObjectsPath+"/{key...}", g.getReceived)
	mux.HandleFunc("PUT "+httpstore.ObjectsPath+"/{key...}", g.putReceived)
	mux.HandleFunc("DELETE "+httpstore.ObjectsPath+"/{key...}", g.deleteReceived)
}

func (g *Gateway) listReceived(w http.ResponseWriter, r *http.Request) {
	objs, err := g.Received.List(r.Context(), r.URL.Query().Get("prefix"))
	if err != nil {
		writeError(w, linstor.RemoteError(err))
		return
	}
	out := httpstore.ListReply{Objects: []httpstore.Object{}}
	for _, o := range objs {
		out.Objects = append(out.Objects, httpstore.Object{Key: o.Key, Size: o.Size, Modified: o.Modified})
	}
	writeJSON(w, http.StatusOK, out)
}

func (g *Gateway) getReceived(w http.ResponseWriter, r *http.Request) {
	b, err := g.Received.Get(r.Context(), r.PathValue("key"))
	if errors.Is(err, backup.ErrNotFound) {
		writeError(w, cairn.Errorf(cairn.CodeNotFound, "no object %s in the received store", r.PathValue("key")))
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(b)
}

// putReceived stores the body under its key once its SHA-256 matches the header's:
// 400 naming the header when it is missing or differs, 413 beyond maxReceivedObject.
func (g *Gateway) putReceived(w http.ResponseWriter, r *http.Request) {
	want, err := hex.DecodeString(r.Header.Get(httpstore.SumHeader))
	if err != nil || len(want) != sha256.Size {
		writeError(w, cairn.InvalidField(httpstore.SumHeader, "required: the body's SHA-256 in hex"))
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxReceivedObject+1))
	if err != nil {
		writeError(w, cairn.Errorf(cairn.CodeInvalidArgument, "object body: %v", err))
		return
	}
	if len(data) > maxReceivedObject {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"ok": false,
			"error": fmt.Sprintf("an object is at most %d bytes", maxReceivedObject)})
		return
	}
	var sum [32]byte
	copy(sum[:], want)
	if got := sha256.Sum256(data); got != sum {
		writeError(w, cairn.InvalidField(httpstore.SumHeader, "the body's SHA-256 is %s, not %x: nothing stored", hex.EncodeToString(got[:]), want))
		return
	}
	if err := g.Received.Put(r.Context(), r.PathValue("key"), data, sum); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

func (g *Gateway) deleteReceived(w http.ResponseWriter, r *http.Request) {
	if err := g.Received.Delete(r.Context(), r.PathValue("key")); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}
