// Package domains holds the pure failure-domain rules of ../shared/reference/failure-domains.md:
// plain values in, plain values out, no NATS, no Pebble, no clock.
package domains

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-io/cairn"
)

// Scheme is an erasure-coding scheme: k data chunks and m parity chunks per stripe.
type Scheme struct {
	Data   int `json:"data_chunks"`
	Parity int `json:"parity_chunks"`
}

// ParseScheme reads "K+M" with k in {1,2,4} and m in {1,2}. Errors are invalid_argument
// naming field "scheme".
func ParseScheme(s string) (Scheme, error) {
	ks, ms, ok := strings.Cut(s, "+")
	k, kerr := strconv.Atoi(ks)
	m, merr := strconv.Atoi(ms)
	if !ok || kerr != nil || merr != nil {
		return Scheme{}, cairn.InvalidField("scheme", "scheme must be K+M (e.g. 2+1), got %q", s)
	}
	sc := Scheme{Data: k, Parity: m}
	return sc, sc.Validate()
}

// Validate checks k in {1,2,4} and m in {1,2}.
func (s Scheme) Validate() error {
	if s.Data != 1 && s.Data != 2 && s.Data != 4 {
		return cairn.InvalidField("scheme", "data chunks must be 1, 2 or 4, got %d", s.Data)
	}
	if s.Parity != 1 && s.Parity != 2 {
		return cairn.InvalidField("scheme", "parity chunks must be 1 or 2, got %d", s.Parity)
	}
	return nil
}

// String is "K+M".
func (s Scheme) String() string { return fmt.Sprintf("%d+%d", s.Data, s.Parity) }

// MinDomains is the fewest failure domains a fresh activation accepts: parity + 2 (and
// never fewer than three).
func (s Scheme) MinDomains() int { return s.Parity + 2 }

// Tolerance is what an activated cluster absorbs with a scheme on a number of domains.
type Tolerance struct {
	Scheme  string `json:"scheme"`
	Domains int    `json:"domains"`
	// CanActivate is false below MinDomains; the other counts are then zero.
	CanActivate bool `json:"can_activate"`
	// ChunksPerDomain is the most chunks of one stripe a domain holds: ceil((k+m)/domains).
	ChunksPerDomain int `json:"chunks_per_domain"`
	// WholeDomains is how many complete domains may fail at once.
	WholeDomains int `json:"whole_domains"`
	// Nodes is, when no whole domain is absorbed, how many individual nodes anywhere may fail.
	Nodes int `json:"nodes"`
	// Verdict is the operator's summary: "cannot activate", "N whole domain(s)" or "N node(s) total".
	Verdict string `json:"verdict"`
}

// ComputeTolerance derives the tolerance from the chunk-per-domain rule: a stripe's k+m
// chunks spread as evenly as the domains allow, so a domain holds at most
// c = ceil((k+m)/domains) of them and costs at most c of the parity budget m when it fails
// whole. floor(m/c) whole domains fit the budget; when none does (c > m), each failed node
// costs one chunk, so m nodes anywhere are absorbed.
func ComputeTolerance(s Scheme, domains int) Tolerance {
	t := Tolerance{Scheme: s.String(), Domains: domains}
	if domains < s.MinDomains() {
		t.Verdict = "cannot activate"
		return t
	}
	t.CanActivate = true
	n := s.Data + s.Parity
	t.ChunksPerDomain = (n + domains - 1) / domains
	t.WholeDomains = s.Parity / t.ChunksPerDomain
	if t.WholeDomains > 0 {
		t.Verdict = plural(t.WholeDomains, "whole domain")
		return t
	}
	t.Nodes = s.Parity
	t.Verdict = plural(t.Nodes, "node") + " total"
	return t
}

func plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}
