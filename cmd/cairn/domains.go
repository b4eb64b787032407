package main

import (
	"fmt"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/commands/domains"
	"github.com/spf13/cobra"
)

func domainsCmd() *cobra.Command {
	c := &cobra.Command{Use: "domains", Short: "Failure-domain rules"}
	var (
		scheme string
		count  int
		asJSON bool
	)
	tol := &cobra.Command{
		Use:   "tolerance",
		Short: "What an activated cluster with scheme K+M on N failure domains absorbs",
		Long: `Print what an activated cluster absorbs: "cannot activate" (fewer than M+2 domains),
"N whole domain(s)", or "N node(s) total" when a domain holds more chunks of a stripe than
the parity budget covers. Derived from the chunk-per-domain rule, not a stored table.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := domains.ParseScheme(scheme)
			if err != nil {
				return err
			}
			if count < 1 {
				return cairn.InvalidField("domains", "--domains must be at least 1, got %d", count)
			}
			t := domains.ComputeTolerance(s, count)
			if asJSON {
				printJSON(t)
				return nil
			}
			if !t.CanActivate {
				fmt.Printf("%s on %d domains: cannot activate (needs at least %d domains)\n", t.Scheme, t.Domains, s.MinDomains())
				return nil
			}
			fmt.Printf("%s on %d domains: %s (at most %d chunk(s) of a stripe per domain)\n", t.Scheme, t.Domains, t.Verdict, t.ChunksPerDomain)
			return nil
		},
	}
	tol.Flags().StringVar(&scheme, "scheme", "", "erasure-coding scheme K+M (K in 1,2,4; M in 1,2)")
	tol.Flags().IntVar(&count, "domains", 0, "number of failure domains")
	tol.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	_ = tol.MarkFlagRequired("scheme")
	_ = tol.MarkFlagRequired("domains")
	c.AddCommand(tol)
	var hc httpClientFlags
	for _, v := range []struct{ use, path, short string }{
		{"status", "/cairn/v1/domains", "Domain balance: every domain with its id, hosts and nodes, and the verdict"},
		{"stores", "/cairn/v1/volume-stores", "Recorded placement: volume stores with failover paths, journal sets"},
		{"plan", "/cairn/v1/placement", "Placement the rules give the current topology (rotation, stores, journals, stripe, tolerance)"},
		{"health", "/cairn/v1/health", "Cluster status (ok, degraded, suspended), reasons and restart plan"},
	} {
		path := v.path
		sub := &cobra.Command{
			Use:   v.use,
			Short: v.short + " (from a running serve's gateway)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				return hc.getAndPrint(path)
			},
		}
		hc.register(sub.Flags())
		c.AddCommand(sub)
	}
	return c
}
