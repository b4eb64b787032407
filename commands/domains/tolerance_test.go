package domains_test

import (
	"fmt"
	"testing"

	"github.com/cairn-io/cairn/commands/domains"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The table of the failure-domains reference, cell by cell; the rule must derive it.
func TestToleranceMatchesTheReferenceTable(t *testing.T) {
	schemes := []string{"1+1", "2+1", "4+1", "1+2", "2+2", "4+2"}
	rows := []struct {
		domains []int
		cells   []string
	}{
		{[]int{1, 2}, []string{"cannot activate", "cannot activate", "cannot activate", "cannot activate", "cannot activate", "cannot activate"}},
		{[]int{3}, []string{"1 whole domain", "1 whole domain", "1 node total", "cannot activate", "cannot activate", "cannot activate"}},
		{[]int{4}, []string{"1 whole domain", "1 whole domain", "1 node total", "2 whole domains", "2 whole domains", "1 whole domain"}},
		{[]int{5}, []string{"1 whole domain", "1 whole domain", "1 whole domain", "2 whole domains", "2 whole domains", "1 whole domain"}},
		{[]int{6, 7, 12}, []string{"1 whole domain", "1 whole domain", "1 whole domain", "2 whole domains", "2 whole domains", "2 whole domains"}},
	}
	for _, row := range rows {
		for _, d := range row.domains {
			for i, sc := range schemes {
				t.Run(fmt.Sprintf("%s on %d", sc, d), func(t *testing.T) {
					s, err := domains.ParseScheme(sc)
					require.NoError(t, err)
					assert.Equal(t, row.cells[i], domains.ComputeTolerance(s, d).Verdict)
				})
			}
		}
	}
}

func TestParseSchemeRefusesBadSchemes(t *testing.T) {
	for _, bad := range []string{"", "3+1", "2+3", "2", "a+b", "2+1+1", "0+1"} {
		_, err := domains.ParseScheme(bad)
		assert.Error(t, err, bad)
	}
}
