package rules

import (
	"strings"
	"testing"

	"github.com/bondd/bondd/classify"
)

// TestBudgetUsed: budget_used: X matches from X of the budget on (in
// permille), only while a connected path has a budget.
func TestBudgetUsed(t *testing.T) {
	md := &classify.Metadata{}
	tests := []struct {
		match string
		ann   Annotations
		want  bool
	}{
		{"budget_used: 0.8", Annotations{BudgetUsed: 800, HasBudget: true}, true},
		{"budget_used: 0.8", Annotations{BudgetUsed: 799, HasBudget: true}, false},
		{"budget_used: 0.8", Annotations{BudgetUsed: 1200, HasBudget: true}, true},
		{"budget_used: 0", Annotations{HasBudget: true}, true},
		{"budget_used: 0", Annotations{}, false},
		{"budget_used: 1", Annotations{BudgetUsed: 1000, HasBudget: true}, true},
		{"budget_used: {exists: true}", Annotations{HasBudget: true}, true},
		{"budget_used: {exists: true}", Annotations{BudgetUsed: 900}, false},
	}
	for _, tt := range tests {
		s := mustCompile(t, "rules:\n  - {id: r, priority: 1, match: {"+tt.match+"}, actions: {priority: 1}}\n", Options{})
		var d Directive
		s.Evaluate(md, &tt.ann, &d)
		if got := d.Rules.Has(0); got != tt.want {
			t.Errorf("%s with %+v: matched %v, want %v", tt.match, tt.ann, got, tt.want)
		}
	}
	for _, bad := range []string{"1.5", "-0.1", "80%", "high"} {
		_, err := CompileBytes("r.yaml", []byte("rules:\n  - {id: r, priority: 1, match: {budget_used: "+bad+"}, actions: {priority: 1}}\n"), Options{})
		if err == nil || !strings.Contains(err.Error(), "want a share of the budget from 0 to 1") {
			t.Errorf("budget_used: %s: %v", bad, err)
		}
	}
}
