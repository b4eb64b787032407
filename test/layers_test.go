package test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/cairn-io/cairn"

// readmeLayers reads the numbered list of README's "## Layers" section: package (relative
// to the module, "cairn" for the root) → layer number.
func readmeLayers(readme string) (map[string]int, error) {
	_, section, ok := strings.Cut(readme, "\n## Layers\n")
	if !ok {
		return nil, fmt.Errorf("README has no \"## Layers\" section")
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	item := regexp.MustCompile(`^(\d+)\. (.*)$`)
	pkg := regexp.MustCompile("`([^`]+)`")
	layers := map[string]int{}
	for _, line := range strings.Split(section, "\n") {
		m := item.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var n int
		fmt.Sscan(m[1], &n)
		for _, p := range pkg.FindAllStringSubmatch(m[2], -1) {
			if prev, dup := layers[p[1]]; dup {
				return nil, fmt.Errorf("%s is in layers %d and %d", p[1], prev, n)
			}
			layers[p[1]] = n
		}
	}
	if len(layers) == 0 {
		return nil, fmt.Errorf("the Layers section lists no packages")
	}
	return layers, nil
}

// side says which side of the wire contracts a package is on: "control" (it decides),
// "agent" (it carries out) or "" (the contracts such as events and drbd, the binary,
// tests).
func side(pkg string) string {
	switch {
	case pkg == "agents" || strings.HasPrefix(pkg, "agents/"):
		return "agent"
	case pkg == "projections" || strings.HasPrefix(pkg, "projections/"),
		pkg == "commands" || strings.HasPrefix(pkg, "commands/"),
		pkg == "cmd/cairn/server" || strings.HasPrefix(pkg, "cmd/cairn/server/"):
		return "control"
	}
	return ""
}

// layerViolations checks a non-test import graph (package → module packages it imports,
// both relative to the module) against the layers: every package placed, every import
// to a strictly lower layer, and no import across the sides except into the contracts.
func layerViolations(graph map[string][]string, layers map[string]int) []string {
	var out []string
	for pkg, imports := range graph {
		l, ok := layers[pkg]
		if !ok {
			out = append(out, fmt.Sprintf("%s is in no layer of README's Layers section", pkg))
			continue
		}
		for _, imp := range imports {
			il, ok := layers[imp]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s imports %s, which is in no layer", pkg, imp))
			case il >= l:
				out = append(out, fmt.Sprintf("%s (layer %d) imports %s (layer %d): imports point down only", pkg, l, imp, il))
			}
			if s, is := side(pkg), side(imp); s != "" && is != "" && s != is {
				out = append(out, fmt.Sprintf("%s (%s side) imports %s (%s side): the sides meet only in the wire contracts", pkg, s, imp, is))
			}
		}
	}
	for pkg := range layers {
		if _, ok := graph[pkg]; !ok {
			out = append(out, fmt.Sprintf("README's Layers section lists %s, which is not a package", pkg))
		}
	}
	sort.Strings(out)
	return out
}

// TestLayerViolationsAreFound runs the checker on graphs that break each rule, so that
// TestImportsPointDownTheREADMEsLayers cannot pass by a checker that finds nothing.
func TestLayerViolationsAreFound(t *testing.T) {
	layers := map[string]int{"cairn": 1, "drbd": 2, "events": 3, "projections": 4, "agents": 4, "commands": 5, "agents/drbdagent": 5}
	ok := map[string][]string{"cairn": nil, "drbd": {"cairn"}, "events": {"drbd"}, "projections": {"events", "drbd"},
		"agents": {"events"}, "commands": {"projections"}, "agents/drbdagent": {"agents", "drbd"}}
	assert.Empty(t, layerViolations(ok, layers))
	for name, c := range map[string]struct {
		edit func(g map[string][]string)
		want string
	}{
		"upward":        {func(g map[string][]string) { g["drbd"] = append(g["drbd"], "events") }, "drbd (layer 2) imports events (layer 3)"},
		"same layer":    {func(g map[string][]string) { g["projections"] = append(g["projections"], "agents") }, "projections (layer 4) imports agents (layer 4)"},
		"across sides":  {func(g map[string][]string) { g["commands"] = append(g["commands"], "agents") }, "commands (control side) imports agents (agent side)"},
		"agent to plan": {func(g map[string][]string) { g["agents/drbdagent"] = append(g["agents/drbdagent"], "projections") }, "agents/drbdagent (agent side) imports projections (control side)"},
		"unplaced":      {func(g map[string][]string) { g["storage/new"] = nil }, "storage/new is in no layer"},
		"stale entry":   {func(g map[string][]string) { delete(g, "agents/drbdagent") }, "lists agents/drbdagent, which is not a package"},
	} {
		g := map[string][]string{}
		for k, v := range ok {
			g[k] = append([]string(nil), v...)
		}
		c.edit(g)
		got := strings.Join(layerViolations(g, layers), "\n")
		assert.Contains(t, got, c.want, name)
	}
}

// TestImportsPointDownTheREADMEsLayers checks the module's import graph (go list, code
// that ships: test files may import upwards) against README's Layers section.
func TestImportsPointDownTheREADMEsLayers(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	layers, err := readmeLayers(string(readme))
	require.NoError(t, err)
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	rel := func(p string) string {
		if p == module {
			return "cairn"
		}
		return strings.TrimPrefix(p, module+"/")
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := rel(fields[0])
		graph[pkg] = []string{}
		for _, imp := range fields[1:] {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				graph[pkg] = append(graph[pkg], rel(imp))
			}
		}
	}
	require.Greater(t, len(graph), 30, "go list found the module's packages")
	assert.Empty(t, layerViolations(graph, layers))
}
