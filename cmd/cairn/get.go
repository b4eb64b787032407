package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-io/cairn"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// getCmd is `cairn get KIND`: what a running serve knows, as a table (a header, one row
// per object), or -o wide|json|yaml; --watch prints it again on every event (the
// gateway's event stream).
func getCmd() *cobra.Command {
	var (
		hc     httpClientFlags
		output string
		watch  bool
		limit  int
		prefix string
	)
	c := &cobra.Command{
		Use:   "get nodes|resources|pools|snapshots|domains|policies|events",
		Short: "Tables of what a running serve knows (from its gateway; --http or $CAIRN_HTTP, --token or $CAIRN_TOKEN)",
		Long: `Print one kind of object as a table: a header, one row per object. -o wide adds
columns, -o json and -o yaml print what the gateway answers. --watch prints the table again
whenever an event is stored (events: each new event as a row). Colour only on a terminal.`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"nodes", "resources", "pools", "snapshots", "domains", "policies", "events"},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "", "table", "wide", "json", "yaml":
			default:
				return cairn.InvalidField("output", "-o must be table, wide, json or yaml, got %q", output)
			}
			g := getter{hc: &hc, out: os.Stdout, wide: output == "wide", limit: limit, prefix: prefix,
				color: isatty.IsTerminal(os.Stdout.Fd())}
			kind := args[0]
			show, ok := g.kinds()[kind]
			if !ok {
				return cairn.InvalidField("kind", "unknown kind %q: nodes, resources, pools, snapshots, domains, policies or events", kind)
			}
			print := func() error {
				data, err := show.fetch()
				if err != nil {
					return err
				}
				switch output {
				case "json":
					b, _ := json.MarshalIndent(data, "", "  ")
					fmt.Fprintln(g.out, string(b))
					return nil
				case "yaml":
					b, err := yaml.Marshal(data)
					if err != nil {
						return err
					}
					fmt.Fprint(g.out, string(b))
					return nil
				}
				return show.table(data)
			}
			if err := print(); err != nil {
				return err
			}
			if !watch {
				return nil
			}
			return g.follow(kind == "events", print)
		},
	}
	hc.register(c.Flags())
	c.Flags().StringVarP(&output, "output", "o", "table", "table, wide, json or yaml")
	c.Flags().BoolVarP(&watch, "watch", "w", false, "print again on every event (the serve's event stream) until interrupted")
	c.Flags().IntVar(&limit, "limit", 100, "resources, snapshots and events: how many (the first ones by name; the last events)")
	c.Flags().StringVar(&prefix, "prefix", "", "resources and snapshots: only definitions whose name starts with this")
	return c
}

// getter fetches and prints the kinds of `cairn get`.
type getter struct {
	hc     *httpClientFlags
	out    io.Writer
	wide   bool
	color  bool
	limit  int
	prefix string
	// lastSeq is the newest event printed (events --watch resumes after it).
	lastSeq uint64
}

type kind struct {
	fetch func() (any, error)
	table func(any) error
}

func (g *getter) kinds() map[string]kind {
	return map[string]kind{
		"nodes":     {g.fetchJSON("/cairn/v1/nodes"), g.nodes},
		"resources": {g.resources, g.resourcesTable},
		"pools":     {g.fetchJSON("/cairn/v1/pools"), g.pools},
		"snapshots": {g.fetchJSON("/cairn/v1/resources?limit=" + strconv.Itoa(g.limit) + "&prefix=" + url.QueryEscape(g.prefix)), g.snapshots},
		"domains":   {g.fetchJSON("/cairn/v1/domains"), g.domains},
		"policies":  {g.fetchJSON("/cairn/v1/policies"), g.yamlTable},
		"events":    {g.events, g.eventsTable},
	}
}

// fetchJSON GETs path and decodes it; an error reply is the gateway's message.
func (g *getter) fetchJSON(path string) func() (any, error) {
	return func() (any, error) {
		var out map[string]any
		return out, g.decode(path, &out)
	}
}

func (g *getter) decode(path string, v any) error {
	body, status, err := g.hc.get(path)
	if err != nil {
		return err
	}
	if status != 200 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("%s: %s (%s)", path, e.Error.Message, e.Error.Code)
		}
		return fmt.Errorf("%s: HTTP %d", path, status)
	}
	return json.Unmarshal(body, v)
}

// tabular prints a header and rows, aligned.
func (g *getter) tabular(header []string, rows [][]string) error {
	w := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	return w.Flush()
}

// paint colours s on a terminal: green for good states, red for bad ones.
func (g *getter) paint(s string) string {
	if !g.color {
		return s
	}
	switch s {
	case "online", "UpToDate", "ok", "balanced", "taken":
		return "\x1b[32m" + s + "\x1b[0m"
	case "offline", "failed", "degraded", "contested", "Inconsistent", "Outdated", "unknown":
		return "\x1b[31m" + s + "\x1b[0m"
	}
	return s
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, str(e))
		}
		return strings.Join(parts, ",")
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func list(v any) []any         { l, _ := v.([]any); return l }

func since(v any) string {
	t, err := time.Parse(time.RFC3339Nano, str(v))
	if err != nil {
		return ""
	}
	return time.Since(t).Round(time.Second).String()
}

func (g *getter) nodes(data any) error {
	var rows [][]string
	for _, n := range list(obj(data)["nodes"]) {
		spec, st := obj(obj(n)["spec"]), obj(obj(n)["status"])
		var flags []string
		if str(obj(spec["properties"])["AutoplaceTarget"]) == "false" {
			flags = append(flags, "cordoned")
		}
		if m := str(spec["maintenance"]); m != "" {
			flags = append(flags, strings.ToLower(m))
		}
		row := []string{str(obj(n)["name"]), str(spec["host"]), str(spec["failure_domain"]), g.paint(str(st["state"])), since(st["since"]), strings.Join(flags, ",")}
		if g.wide {
			row = append(row, str(spec["address"]), str(spec["role"]), str(st["reason"]))
		}
		rows = append(rows, row)
	}
	header := []string{"NAME", "HOST", "DOMAIN", "STATE", "FOR", "FLAGS"}
	if g.wide {
		header = append(header, "ADDRESS", "ROLE", "REASON")
	}
	return g.tabular(header, rows)
}

// resources reads a page of definitions and each one's view (replicas as their agents
// report them).
func (g *getter) resources() (any, error) {
	var page struct {
		Resources []struct {
			Name string `json:"name"`
		} `json:"resources"`
	}
	if err := g.decode("/cairn/v1/resources?limit="+strconv.Itoa(g.limit)+"&prefix="+url.QueryEscape(g.prefix), &page); err != nil {
		return nil, err
	}
	out := []any{}
	for _, r := range page.Resources {
		var rv map[string]any
		if err := g.decode("/cairn/v1/resources/"+url.PathEscape(r.Name), &rv); err != nil {
			return nil, err
		}
		out = append(out, rv)
	}
	return map[string]any{"resources": out}, nil
}

func (g *getter) resourcesTable(data any) error {
	var rows [][]string
	for _, r := range list(obj(data)["resources"]) {
		rv := obj(r)
		size := 0.0
		for _, v := range list(rv["volumes"]) {
			size += obj(v)["size_kib"].(float64)
		}
		var reps []string
		for _, rep := range list(rv["replicas"]) {
			rp := obj(rep)
			state := "diskless"
			if rp["tiebreaker"] == true {
				state = "tiebreaker"
			} else if rp["diskless"] != true {
				state = "unknown"
				if o := obj(rp["observed"]); o != nil {
					var ds []string
					for _, v := range list(o["volumes"]) {
						ds = append(ds, str(obj(v)["disk_state"]))
					}
					state = strings.Join(ds, ",") + syncNote(o)
				}
			}
			reps = append(reps, str(rp["node"])+":"+g.paint(state))
		}
		health := fmt.Sprintf("%s/%s", str(rv["up_to_date"]), str(rv["place_count"]))
		if rv["degraded"] == true {
			health += " " + g.paint("degraded")
		}
		row := []string{str(rv["name"]), str(rv["resource_group"]), fmt.Sprintf("%.0f KiB", size), health, strings.Join(reps, " ")}
		if g.wide {
			row = append(row, str(rv["port"]), strconv.Itoa(len(list(rv["snapshots"]))))
		}
		rows = append(rows, row)
	}
	header := []string{"NAME", "GROUP", "SIZE", "UPTODATE", "REPLICAS"}
	if g.wide {
		header = append(header, "PORT", "SNAPSHOTS")
	}
	return g.tabular(header, rows)
}

// syncNote describes the resyncs a replica's report shows under way: to or from which
// peer, what is left, and the rate and time left once the agent measured them (e.g.
// "(sync n2: 60000 KiB left, 4000 KiB/s, 15s)"); "" when none.
func syncNote(observed map[string]any) string {
	var notes []string
	for _, p := range list(observed["peers"]) {
		pm := obj(p)
		for _, v := range list(pm["volumes"]) {
			vm := obj(v)
			left, ok := vm["out_of_sync_kib"].(float64)
			if !ok || left == 0 {
				continue
			}
			n := fmt.Sprintf("sync %s: %.0f KiB left", str(pm["node"]), left)
			if r, ok := vm["sync_rate_kib_s"].(float64); ok {
				n += fmt.Sprintf(", %.0f KiB/s", r)
			}
			if eta, ok := vm["sync_eta_s"].(float64); ok {
				n += ", " + (time.Duration(eta) * time.Second).String()
			}
			notes = append(notes, n)
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return "(" + strings.Join(notes, "; ") + ")"
}

func (g *getter) pools(data any) error {
	var rows [][]string
	for _, p := range list(obj(data)["pools"]) {
		pm := obj(p)
		mmp := "ok"
		if pm["contested"] == true {
			mmp = "contested: " + str(pm["contest_reason"])
		}
		rows = append(rows, []string{str(pm["name"]), str(pm["owner"]), g.paint(mmp), str(pm["nodes"])})
	}
	return g.tabular([]string{"NAME", "OWNER", "MMP", "NODES"}, rows)
}

func (g *getter) snapshots(data any) error {
	var rows [][]string
	for _, r := range list(obj(data)["resources"]) {
		for _, s := range list(obj(r)["snapshots"]) {
			sm := obj(s)
			row := []string{str(obj(r)["name"]), str(sm["name"]), g.paint(str(sm["phase"])), str(sm["nodes"])}
			if g.wide {
				row = append(row, str(sm["started_at"]), str(sm["reason"]))
			}
			rows = append(rows, row)
		}
	}
	header := []string{"RESOURCE", "NAME", "PHASE", "NODES"}
	if g.wide {
		header = append(header, "STARTED", "REASON")
	}
	return g.tabular(header, rows)
}

func (g *getter) domains(data any) error {
	d := obj(data)
	var rows [][]string
	for _, dom := range list(d["domains"]) {
		dm := obj(dom)
		rows = append(rows, []string{str(dm["label"]), str(dm["id"]), strconv.Itoa(len(list(dm["hosts"]))), str(dm["hosts"]), str(dm["nodes"])})
	}
	if err := g.tabular([]string{"DOMAIN", "ID", "HOSTS", "HOST NAMES", "NODES"}, rows); err != nil {
		return err
	}
	if d["failure_domains"] == true {
		fmt.Fprintf(g.out, "verdict: %s\n", g.paint(str(d["verdict"])))
	} else {
		fmt.Fprintln(g.out, "failure domains are off")
	}
	return nil
}

// yamlTable prints a nested answer (the policies) as YAML: it has no rows.
func (g *getter) yamlTable(data any) error {
	b, err := yaml.Marshal(data)
	if err != nil {
		return err
	}
	_, err = g.out.Write(b)
	return err
}

// events reads the last --limit events.
func (g *getter) events() (any, error) {
	var h struct {
		Seq uint64 `json:"seq"`
	}
	if err := g.decode("/cairn/v1/health", &h); err != nil {
		return nil, err
	}
	from := uint64(1)
	if h.Seq > uint64(g.limit) {
		from = h.Seq - uint64(g.limit) + 1
	}
	var out map[string]any
	err := g.decode(fmt.Sprintf("/cairn/v1/events?from_seq=%d&limit=%d", from, g.limit), &out)
	return out, err
}

func (g *getter) eventsTable(data any) error {
	var rows [][]string
	for _, e := range list(obj(data)["events"]) {
		rows = append(rows, g.eventRow(obj(e)))
	}
	return g.tabular(g.eventHeader(), rows)
}

func (g *getter) eventHeader() []string {
	h := []string{"SEQ", "TIME", "TYPE", "SUBJECT", "ACTOR"}
	if g.wide {
		h = append(h, "PAYLOAD")
	}
	return h
}

func (g *getter) eventRow(e map[string]any) []string {
	seq, _ := e["seq"].(float64)
	g.lastSeq = max(g.lastSeq, uint64(seq))
	at := str(e["occurred_at"])
	if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
		at = t.Local().Format("2006-01-02 15:04:05")
	}
	row := []string{str(e["seq"]), at, str(e["type"]), str(e["subject"]), str(e["actor"])}
	if g.wide {
		b, _ := json.Marshal(e["payload"])
		row = append(row, string(b))
	}
	return row
}

// follow reads the serve's event stream: for events it prints every new one as a row;
// for the other kinds it prints the table again (at most every 200 ms).
func (g *getter) follow(rows bool, print func() error) error {
	headers := map[string]string{}
	if rows && g.lastSeq > 0 {
		headers["Last-Event-ID"] = strconv.FormatUint(g.lastSeq, 10)
	}
	resp, err := g.hc.request("GET", "/cairn/v1/events/stream", headers)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("event stream: HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var last time.Time
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		if rows {
			var e map[string]any
			if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e) == nil && e["seq"] != nil {
				w := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, strings.Join(g.eventRow(e), "\t"))
				_ = w.Flush()
			}
			continue
		}
		if time.Since(last) < 200*time.Millisecond {
			continue
		}
		last = time.Now()
		fmt.Fprintln(g.out)
		if err := print(); err != nil {
			return err
		}
	}
	return sc.Err()
}

// describeCmd is `cairn describe resource NAME`: the definition with its replicas as
// their agents report them, its snapshots, and its history (every event on its subject).
func describeCmd() *cobra.Command {
	var hc httpClientFlags
	c := &cobra.Command{
		Use:   "describe resource NAME",
		Short: "A resource definition in detail, with its history (from a running serve's gateway)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "resource" {
				return cairn.InvalidField("kind", "describe knows resource, got %q", args[0])
			}
			g := &getter{hc: &hc, out: os.Stdout, color: isatty.IsTerminal(os.Stdout.Fd())}
			var rv map[string]any
			if err := g.decode("/cairn/v1/resources/"+url.PathEscape(args[1]), &rv); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "Name:        %s\nGroup:       %s\nPort:        %s\nUpToDate:    %s of %s\n", str(rv["name"]), str(rv["resource_group"]), str(rv["port"]), str(rv["up_to_date"]), str(rv["place_count"]))
			var vols [][]string
			for _, v := range list(rv["volumes"]) {
				vols = append(vols, []string{str(obj(v)["volume"]), str(obj(v)["size_kib"]) + " KiB"})
			}
			fmt.Fprintln(g.out, "\nVolumes:")
			_ = g.tabular([]string{"VOLUME", "SIZE"}, vols)
			var reps [][]string
			for _, r := range list(rv["replicas"]) {
				rp := obj(r)
				o := obj(rp["observed"])
				var disks, peers []string
				for _, v := range list(o["volumes"]) {
					disks = append(disks, g.paint(str(obj(v)["disk_state"])))
				}
				for _, p := range list(o["peers"]) {
					peers = append(peers, str(obj(p)["node"])+":"+str(obj(p)["connection"]))
				}
				kind := "disk"
				if rp["tiebreaker"] == true {
					kind = "tiebreaker"
				} else if rp["diskless"] == true {
					kind = "diskless"
				}
				reps = append(reps, []string{str(rp["node"]), kind, str(rp["node_id"]), strings.Join(disks, ","), str(o["role"]), strings.Join(peers, " ")})
			}
			fmt.Fprintln(g.out, "\nReplicas:")
			_ = g.tabular([]string{"NODE", "KIND", "NODE ID", "DISK", "ROLE", "PEERS"}, reps)
			if snaps := list(rv["snapshots"]); len(snaps) > 0 {
				fmt.Fprintln(g.out, "\nSnapshots:")
				var rows [][]string
				for _, s := range snaps {
					rows = append(rows, []string{str(obj(s)["name"]), g.paint(str(obj(s)["phase"])), str(obj(s)["nodes"])})
				}
				_ = g.tabular([]string{"NAME", "PHASE", "NODES"}, rows)
			}
			var hist map[string]any
			if err := g.decode("/cairn/v1/events?limit=1000&subject="+url.QueryEscape("cairn.ev.rd."+args[1]), &hist); err != nil {
				return err
			}
			evs := list(hist["events"])
			sort.SliceStable(evs, func(i, j int) bool { return obj(evs[i])["seq"].(float64) < obj(evs[j])["seq"].(float64) })
			var rows [][]string
			for _, e := range evs {
				rows = append(rows, g.eventRow(obj(e)))
			}
			fmt.Fprintln(g.out, "\nHistory:")
			return g.tabular(g.eventHeader(), rows)
		},
	}
	hc.register(c.Flags())
	return c
}
