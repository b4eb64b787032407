package linstor

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"

	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/projections"
)

// ErrorReport is LINSTOR's error report. Cairn's reports are the commands this serve
// refused (the last 1,000), the agents' failures (a replica whose desired state failed
// to apply, latest per replica) and the stored messages the projector refused as events.
// Its Filename is LINSTOR's "ErrorReport-<id>.log": the CLI lists the id it reads from
// there, and `linstor error-reports show <id>` asks for that id.
type ErrorReport struct {
	NodeName  string `json:"node_name"`
	ErrorTime int64  `json:"error_time"`
	Filename  string `json:"filename"`
	Text      string `json:"text,omitempty"`
	Module    string `json:"module,omitempty"`
}

// reportFile is the file name of the error report id, as LINSTOR names them.
func reportFile(id string) string { return "ErrorReport-" + id + ".log" }

// errorReports collects every report, newest first.
func errorReports(v *projections.View, refusals []admission.Refusal) ([]ErrorReport, error) {
	var out []ErrorReport
	for _, f := range refusals {
		out = append(out, ErrorReport{NodeName: "controller", ErrorTime: f.At.UnixMilli(), Module: "CONTROLLER",
			Filename: reportFile("refusal-" + f.CommandID),
			Text:     fmt.Sprintf("%s (command %s, actor %s) refused: %s: %s", f.Verb, f.CommandID, f.Actor, f.Error.Code, f.Error.Message)})
	}
	err := v.EachResourceStatus(func(st drbd.Status) error {
		if st.Error != "" {
			out = append(out, ErrorReport{NodeName: st.Node, ErrorTime: st.At.UnixMilli(), Module: "SATELLITE",
				Filename: reportFile(fmt.Sprintf("drbd-%s-%s-r%d", st.Resource, st.Node, st.Revision)),
				Text:     fmt.Sprintf("resource %s on node %s (%s): %s", st.Resource, st.Node, st.Phase, st.Error)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rejected, err := v.Rejected()
	if err != nil {
		return nil, err
	}
	for _, rj := range rejected {
		out = append(out, ErrorReport{NodeName: "controller", Module: "CONTROLLER", Filename: reportFile("rejected-" + strconv.FormatUint(rj.Seq, 10)),
			Text: fmt.Sprintf("stream message %d on %s is not a valid event: %s", rj.Seq, rj.Subject, rj.Reason)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ErrorTime > out[j].ErrorTime })
	return out, nil
}

// listErrorReports serves the reports, ?since= and ?to= in Unix milliseconds;
// ?withContent=False drops the text.
func (a *API) listErrorReports(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, _ := strconv.ParseInt(q.Get("since"), 10, 64)
	to, _ := strconv.ParseInt(q.Get("to"), 10, 64)
	withContent := q.Get("withContent") == "" || truthy(q.Get("withContent"))
	a.withView(w, 0, func(v *projections.View) (any, error) {
		all, err := errorReports(v, a.refusals())
		out := make([]ErrorReport, 0, len(all))
		for _, e := range all {
			if since > 0 && e.ErrorTime < since || to > 0 && e.ErrorTime > to {
				continue
			}
			if !withContent {
				e.Text = ""
			}
			out = append(out, e)
		}
		return page(q, out), err
	})
}

// getErrorReport serves one report by its id (what the CLI lists; its file name works
// too).
func (a *API) getErrorReport(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	a.withView(w, 0, func(v *projections.View) (any, error) {
		all, err := errorReports(v, a.refusals())
		out := []ErrorReport{}
		for _, e := range all {
			if e.Filename == id || e.Filename == reportFile(id) {
				out = append(out, e)
			}
		}
		return out, err
	})
}

func (a *API) refusals() []admission.Refusal {
	if a.Refusals == nil {
		return nil
	}
	return a.Refusals()
}
