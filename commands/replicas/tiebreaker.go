package replicas

import "sort"

// TiebreakerPlan is what the tiebreaker rule decides after a change to a definition's
// replicas: add a diskless tiebreaker on Add, or remove the one on Remove (at most one
// of them is set). Warning explains a tiebreaker that is needed but has no node.
type TiebreakerPlan struct {
	Add     string
	Remove  string
	Warning string
}

// NeedsTiebreaker reports whether members need a tiebreaker: exactly two diskful
// replicas and no other diskless replica to break a tie between them.
func NeedsTiebreaker(members []Member) bool {
	diskful, voters := 0, 0
	for _, m := range members {
		switch {
		case !m.Diskless:
			diskful++
		case !m.Tiebreaker:
			voters++
		}
	}
	return diskful == 2 && voters == 0
}

// PlanTiebreaker applies the rule to members (the definition's replicas after the
// change): with two diskful replicas and no diskless one, add a tiebreaker on an online
// node without a replica that is not cordoned, preferring a failure domain neither diskful replica is in,
// then the name; remove an existing tiebreaker that is no longer needed.
func PlanTiebreaker(members []Member, candidates []Candidate) TiebreakerPlan {
	var tb string
	holding := map[string]bool{}
	diskfulDomains := map[string]bool{}
	for _, m := range members {
		holding[m.Node] = true
		if m.Tiebreaker {
			tb = m.Node
		}
		if !m.Diskless && m.Domain != "" {
			diskfulDomains[m.Domain] = true
		}
	}
	need := NeedsTiebreaker(members)
	switch {
	case need && tb == "":
		var eligible []Candidate
		for _, c := range candidates {
			if c.Online && !holding[c.Node] && c.Cordoned == "" {
				eligible = append(eligible, c)
			}
		}
		if len(eligible) == 0 {
			return TiebreakerPlan{Warning: "two diskful replicas and no online node free for a diskless tiebreaker: quorum cannot break a tie"}
		}
		sort.SliceStable(eligible, func(i, j int) bool {
			oi, oj := !diskfulDomains[eligible[i].Domain], !diskfulDomains[eligible[j].Domain]
			if oi != oj {
				return oi
			}
			return eligible[i].Node < eligible[j].Node
		})
		return TiebreakerPlan{Add: eligible[0].Node}
	case !need && tb != "":
		return TiebreakerPlan{Remove: tb}
	}
	return TiebreakerPlan{}
}
